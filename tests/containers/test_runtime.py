"""The container seam against this machine's real runtimes (podman, runc/crun as
scripts/install-system-deps.sh installs them): what `gtc doctor` says, and an image that
cannot be had."""

from __future__ import annotations

import shutil

import pytest

from jupyter_gtc.containers import images, runtime

needs_podman = pytest.mark.skipif(shutil.which("podman") is None, reason="podman is not installed "
                                  "(scripts/install-system-deps.sh installs it)")


@needs_podman
def test_doctor_names_the_runtime_found_with_its_version(tmp_path):
    from jupyter_gtc.services.doctor import run_checks

    rows = {name: (ok, detail) for name, ok, detail in run_checks(tmp_path)}
    ok, detail = rows["container runtime"]
    version = runtime.version_of(runtime._local(["podman", "--version"]))
    assert ok and f"podman {version}" in detail, detail


def test_doctor_without_a_runtime_says_how_to_get_one():
    found = runtime.detect(which=lambda name: None)
    [(name, ok, detail)] = runtime.doctor_rows(found)
    assert (name, ok) == ("container runtime", False)
    assert "apt-get install -y podman" in detail and "refused" in detail


@needs_podman
def test_an_image_that_cannot_be_had_names_it_and_each_way_tried():
    engine = runtime.detect().engine
    with pytest.raises(images.ImageUnavailable) as info:
        images.ensure(engine, "registry.invalid/nobody/no-such-image:1")
    message = str(info.value)
    assert "registry.invalid/nobody/no-such-image:1" in message
    assert "podman's image store (not there)" in message and "podman pull" in message


@needs_podman
def test_a_missing_archive_is_named_with_its_path(tmp_path):
    engine = runtime.detect().engine
    with pytest.raises(images.ImageUnavailable, match=f"the local archive {tmp_path}/train.tar"):
        images.ensure(engine, f"docker-archive:{tmp_path}/train.tar")


def _runs_trainer(engine, reference: str) -> str:
    from jupyter_gtc._process import run
    from jupyter_gtc.containers.argv import run_argv

    found = runtime.detect()
    return run(run_argv(engine, reference, args=["--from", "archive"], oci_runtime=found.oci_runtime),
               timeout=120).stdout


@needs_podman
def test_an_image_of_ones_own_from_a_docker_archive_or_an_oci_layout_runs_with_no_registry(tmp_path):
    from jupyter_gtc._process import run
    from tests.containers.image import trainer_image

    engine = runtime.detect().engine
    image = trainer_image()
    archive = tmp_path / "trainer.tar"
    run(["podman", "save", "--quiet", "--format", "docker-archive", "--output", str(archive), image], timeout=300)
    loaded = images.ensure(engine, f"docker-archive:{archive}")
    assert '"argv": ["--from", "archive"]' in _runs_trainer(engine, loaded)
    layout = tmp_path / "trainer-layout"
    run(["skopeo", "copy", "--quiet", f"containers-storage:{image}", f"oci:{layout}:v1"], timeout=300)
    copied = images.ensure(engine, f"oci:{layout}:v1")
    try:
        assert '"in_container": true' in _runs_trainer(engine, copied)
    finally:  # the name podman gave the copy (the layout's path), that name only: untag with none drops all
        names = run(["podman", "image", "inspect", "--format", "{{range .RepoTags}}{{.}} {{end}}", copied]).stdout
        for name in (n for n in names.split() if "trainer-layout" in n):
            run(["podman", "untag", copied, name], check=False)
