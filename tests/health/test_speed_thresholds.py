"""The GPU checks' verdicts on what GPUs report: speed, each GPU's bf16 matmul rate against its
model's datasheet peak (spec/machines.GPU_PEAK_BF16_TFLOPS) and the node's fastest GPU;
correctness, each GPU's digest against its peers'. Measuring needs a GPU (bench/gpu.py)."""

from __future__ import annotations

from jupyter_gtc.health.checks import digests_verdict, speed_verdict


def test_an_h200_at_the_rate_measured_on_one_passes_and_says_against_what():
    result = speed_verdict([("NVIDIA H200", 790.0)])  # 769-798 TFLOP/s measured on an H200
    assert result.verdict == "pass"
    assert "790 TFLOP/s" in result.evidence and "80% of its datasheet 989.5" in result.evidence


def test_a_throttled_gpu_warns_and_a_broken_one_fails_against_its_own_model():
    assert speed_verdict([("NVIDIA H100 80GB HBM3", 500.0)]).verdict == "warn"  # 51% of 989.5
    assert speed_verdict([("NVIDIA H100 80GB HBM3", 350.0)]).verdict == "fail"  # 35%
    # the same 500 TFLOP/s is a healthy H100 PCIe's rate (peak 756.5): not measured against the SXM part's
    assert speed_verdict([("NVIDIA H100 PCIe", 500.0)]).verdict == "pass"
    # an A100's 280 is 90% of its 312; a B200 at 1,600 is 71% of its 2,250
    assert speed_verdict([("NVIDIA A100-SXM4-80GB", 280.0)]).verdict == "pass"
    assert speed_verdict([("NVIDIA B200", 1600.0)]).verdict == "pass"
    assert speed_verdict([("NVIDIA B200", 800.0)]).verdict == "fail"  # an H100's rate is a broken B200's


def test_a_gpu_at_half_its_peers_speed_fails_even_without_a_datasheet_figure():
    result = speed_verdict([("NVIDIA L40S", 300.0), ("NVIDIA L40S", 140.0)])
    assert result.verdict == "fail"
    assert "GPU 1" in result.evidence and "under half the fastest GPU's 300" in result.evidence
    assert "no datasheet figure" in result.evidence
    assert speed_verdict([("NVIDIA L40S", 300.0), ("NVIDIA L40S", 290.0)]).verdict == "pass"


def test_a_gpu_whose_digest_differs_from_its_peers_fails_the_correctness_check():
    same = digests_verdict([("NVIDIA H200", "aaaa"), ("NVIDIA H200", "aaaa")])
    assert same.verdict == "pass" and "2 x NVIDIA H200: GPU digest aaaa" in same.evidence
    odd = digests_verdict([("NVIDIA H200", "aaaa"), ("NVIDIA H200", "bbbb"), ("NVIDIA H200", "aaaa")])
    assert odd.verdict == "fail" and "GPU 1 computes bbbb, not aaaa" in odd.evidence
    # different models run different kernels: their digests may differ
    assert digests_verdict([("NVIDIA H200", "aaaa"), ("NVIDIA A100-SXM4-80GB", "cccc")]).verdict == "pass"
