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
