"""docs/python.md's examples are the code users copy: run every ```python block, in order,
in one fresh interpreter against the test server (with --allow_shm)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from conftest import REPO, need


def test_docs_python_blocks_run(addr):
    need("torch"), need("transformers"), need("mlx_lm"), need("outlines")
    text = (REPO / "docs" / "python.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 6
    env = dict(os.environ, MASKD_ADDR=addr, MASKD_ALLOW_SHM="1")
    r = subprocess.run([sys.executable, "-c", "\n".join(blocks)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
