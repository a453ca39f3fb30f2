import click


@click.command("predict")
def predict_cmd() -> None:
    """(being built)"""
    raise click.ClickException("predict is being built")
