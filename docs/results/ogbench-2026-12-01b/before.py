"""`mqe_model.quasimetric` as of a5a3726 (the fused pairwise about the origin), read from git, for the
before/after scripts beside this file."""
import importlib.util
import subprocess
import tempfile


def quasimetric_before():
    """The module as it was before the centring."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(subprocess.run(["git", "show", "a5a3726:mqe_model/quasimetric.py"], capture_output=True,
                               text=True, check=True).stdout)
    spec = importlib.util.spec_from_file_location("quasimetric_before", f.name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
