import click


@click.group("testbed")
def testbed_cmd() -> None:
    """(being built)"""
