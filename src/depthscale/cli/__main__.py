"""``python -m depthscale.cli`` runs the ``depthscale`` command."""

from depthscale.cli import run

run()
