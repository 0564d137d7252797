"""Gradient synchronization engine (placeholder until the engine lands: returns its inputs)."""


def distribute(model, optimizer, algorithm="gradient_allreduce", **options):
    """Placeholder: the real engine wraps ``model`` so gradients are averaged across ranks."""
    return model, optimizer
