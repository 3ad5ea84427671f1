"""notebooks/quickstart.ipynb runs top to bottom (nbclient, a real Jupyter kernel): the notebook's
own asserts check that the loss falls, speculative greedy equals plain greedy, the RL replay's
importance ratio is 1 on policy, and the RL step through train_step is finite."""

import os

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_quickstart_notebook_executes_top_to_bottom():
    path = os.path.join(ROOT, "notebooks", "quickstart.ipynb")
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": os.path.dirname(path)}},
    ).execute()
    outputs = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    assert "loss " in outputs and "RL step: loss" in outputs
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert images, "the loss plot was not rendered"
