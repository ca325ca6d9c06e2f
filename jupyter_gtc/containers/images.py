"""An image had where a task runs: already in the runtime's store, loaded from a local archive
(``podman load``: a docker or OCI archive, ``docker-archive:PATH``, ``oci-archive:PATH``),
copied from an OCI layout (``oci:DIR[:TAG]``), or pulled from its registry. One that cannot be
had is an ``ImageUnavailable`` naming the image and each way tried, with why it failed."""

from __future__ import annotations

import json
import os
import re

from .._process import run
from ..exceptions import CommandError, GtcError
from .runtime import Found

PULL_TIMEOUT = 1800  # a training image is gigabytes; a registry that cannot be reached fails in seconds
LOAD_TIMEOUT = 600
ARCHIVE_TRANSPORTS = ("docker-archive:", "oci-archive:")
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz")


class ImageUnavailable(GtcError):
    def __init__(self, image: str, tried: list[str]):
        self.image, self.tried = image, tried
        super().__init__(f"image {image} cannot be had here; tried: " + "; ".join(tried))


def is_local_source(image: str) -> bool:
    """Whether ``image`` names files here (an archive or an OCI layout), not a registry's image."""
    return image.startswith((*ARCHIVE_TRANSPORTS, "oci:", "/", "./", "~")) or image.endswith(ARCHIVE_SUFFIXES)


def _why(error: Exception) -> str:
    text = getattr(error, "stderr", "") or str(error)
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else str(error))[:400]


def ensure(engine: Found, image: str) -> str:
    """The reference ``engine`` runs ``image`` by, once the image is in its store."""
    tool = engine.path
    tried: list[str] = []
    if is_local_source(image):
        transport, _, rest = image.partition(":") if image.startswith((*ARCHIVE_TRANSPORTS, "oci:")) else ("", "", image)
        path = os.path.expanduser(rest.split(":", 1)[0] if transport == "oci" else rest)
        if not os.path.exists(path):
            raise ImageUnavailable(image, [f"the local {'OCI layout' if transport == 'oci' else 'archive'} "
                                           f"{path} (no such file or folder)"])
        if transport == "oci":  # a layout folder: copied into the store (podman names it after the path)
            try:
                pulled = run([tool, "pull", "--quiet", f"oci:{path}:{rest.split(':', 1)[1]}" if ":" in rest
                              else f"oci:{path}"], timeout=LOAD_TIMEOUT)
                return pulled.stdout.split()[-1]  # --quiet: it prints the image's id alone
            except (CommandError, OSError) as e:
                raise ImageUnavailable(image, [f"{engine.name} pull oci:{path} ({_why(e)})"]) from None
        try:
            loaded = run([tool, "load", "--input", path], timeout=LOAD_TIMEOUT)
        except (CommandError, OSError) as e:
            raise ImageUnavailable(image, [f"{engine.name} load --input {path} ({_why(e)})"]) from None
        names = re.findall(r"Loaded image(?:\(s\))?:\s*(\S+)", loaded.stdout + loaded.stderr)
        if not names:
            raise ImageUnavailable(image, [f"{engine.name} load --input {path} (it named no image it loaded)"])
        return names[-1].split(",")[0]
    try:
        run([tool, "image", "inspect", "--format", "{{.Id}}", image], timeout=60)
        return image
    except (CommandError, OSError):
        tried.append(f"{engine.name}'s image store (not there)")
    try:
        run([tool, "pull", "--quiet", image], timeout=PULL_TIMEOUT)
        return image
    except (CommandError, OSError) as e:
        tried.append(f"{engine.name} pull {image} ({_why(e)})")
    tried.append("to run an image of your own with no registry: podman load -i IMAGE.tar, then give its name, or "
                 "give docker-archive:/path/IMAGE.tar or oci:/path/LAYOUT[:TAG] as the image")
    raise ImageUnavailable(image, tried)



def entrypoint(engine: Found, reference: str) -> list[str]:
    """The ENTRYPOINT of ``reference`` (in ``engine``'s store): what runs for a ``command: []``
    whose arguments replace the image's CMD, as a tuning trial's flags do. Empty: it has none."""
    shown = run([engine.path, "image", "inspect", "--format", "{{json .Config.Entrypoint}}", reference], timeout=60)
    words = json.loads(shown.stdout.strip() or "null")
    return [str(w) for w in words] if isinstance(words, list) else []
