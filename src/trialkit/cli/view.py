"""`trialkit view`: browse the store in a local web page."""

from __future__ import annotations

import errno
import socket

import click

from trialkit.cli._common import debug_option, fail, handle_errors, open_store, store_option

VIEW_PACKAGES = {"starlette", "jinja2", "uvicorn", "markupsafe", "h11"}
"""What the `view` extra installs: one of them missing is a one-line error."""


@click.command("view")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Anything but a loopback address shows your runs to the network.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a web browser.")
@click.option(
    "--read-only",
    is_flag=True,
    help="Show labels but take none: no review form, and every POST refused.",
)
@store_option
@debug_option
@handle_errors
def view_command(
    host: str,
    port: int,
    open_browser: bool,
    read_only: bool,
    store_url: str | None,
    debug: bool,
) -> None:
    """Serve a web viewer of the store until Ctrl-C: the runs, each run's report, every
    trial's transcript, transcript diffs and comparisons of runs, the same as JSON under
    /api/, and review forms that label trials (on loopback, unless --read-only)."""
    try:
        from trialkit.view import ViewServer
    except ModuleNotFoundError as exc:
        package = (exc.name or "").partition(".")[0]
        if package not in VIEW_PACKAGES:
            raise
        fail(f"trialkit view needs {package}: pip install 'trialkit[view]'")

    with open_store(store_url) as store:
        try:
            server = ViewServer(store, host=host, port=port, read_only=read_only)
        except OSError as exc:
            fail(listen_error(host, port, exc))
        click.echo(f"trialkit view: {server.url} (store {store.url}); Ctrl-C stops it", err=True)
        click.echo(server.url)  # alone on stdout, for scripts
        if open_browser:
            import webbrowser

            webbrowser.open(server.url)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.close()


def listen_error(host: str, port: int, exc: OSError) -> str:
    """Why the viewer cannot listen, naming the option at fault and a value that works."""
    where = f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"{where}; --host {host!r} is not an address of this machine: use 127.0.0.1 (the "
            "default), ::1, or an address of one of its network interfaces (0.0.0.0: all)"
        )
    if exc.errno == errno.EADDRINUSE:
        return f"{where}; another program uses port {port}: choose another --port, or --port 0"
    if exc.errno == errno.EACCES:
        return f"{where}; ports below 1024 need privileges: use --port 8765, or --port 0"
    return f"{where}; check --host and --port"
