"""``python -m depthscale`` runs the ``depthscale`` command."""

from depthscale.cli import run

run()
