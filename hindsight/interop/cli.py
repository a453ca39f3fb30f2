import click


@click.command("export")
def export_cmd() -> None:
    """(being built)"""
    raise click.ClickException("export is being built")


@click.command("import")
def import_cmd() -> None:
    """(being built)"""
    raise click.ClickException("import is being built")
