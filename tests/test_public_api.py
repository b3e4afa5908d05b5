"""The public API: every public module, class, function and method is documented; exports resolve."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
from pathlib import Path

import ai_transport


def _public_modules():
    for info in pkgutil.walk_packages(ai_transport.__path__, "ai_transport."):
        if info.name.endswith("__main__"):
            continue
        yield importlib.import_module(info.name)


def test_every_public_name_has_a_docstring():
    missing = []
    for mod in _public_modules():
        if not mod.__doc__:
            missing.append(mod.__name__)
        for name, obj in vars(mod).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
                continue
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if not inspect.getdoc(obj):
                missing.append(f"{mod.__name__}.{name}")
            if inspect.isclass(obj):
                for attr, value in vars(obj).items():
                    if attr.startswith("_"):
                        continue
                    fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
                    if inspect.isfunction(fn) and not inspect.getdoc(getattr(obj, attr, None)):
                        missing.append(f"{mod.__name__}.{name}.{attr}")
    assert missing == []


def test_every_export_resolves():
    for mod in [ai_transport, *_public_modules()]:
        for name in getattr(mod, "__all__", []):
            assert getattr(mod, name) is not None, f"{mod.__name__}.{name}"


def test_package_is_typed():
    assert (Path(ai_transport.__file__).parent / "py.typed").exists()


def test_importing_the_package_does_not_import_the_ably_sdk():
    import subprocess

    code = "import sys, ai_transport; ai_transport.to_responses_input([]); print('ably' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_user_code_on_the_codecs_type_checks(tmp_path):
    """A user's mypy sees the codecs' static methods (a ``__new__ -> NoReturn`` once made each class a
    function to mypy: every ``ResponsesCodec.create_…`` call failed type-checking)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    user = tmp_path / "user_code.py"
    user.write_text(
        "from ai_transport import ResponsesCodec, UIMessageCodec\n"
        "a = ResponsesCodec.create_user_message('hi')\n"
        "b = UIMessageCodec.create_user_message({'id': 'u1', 'role': 'user', 'parts': []})\n"
        "s = UIMessageCodec.init()\n"
        "m = UIMessageCodec.get_messages(s)\n"
        "p = ResponsesCodec.init()\n"
        "n = ResponsesCodec.get_messages(p)\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent", str(user)],
        capture_output=True, text=True, cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(Path(__file__).resolve().parent.parent)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
