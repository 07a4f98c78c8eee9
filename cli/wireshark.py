"""tcpvar wireshark: Wireshark support for the NGWA IPv4 option."""
from __future__ import annotations

import click


@click.group(short_help="Decode the NGWA IPv4 option in Wireshark and tshark.")
def wireshark():
    """Wireshark and tshark support: the NGWA dissector (dissectors/ngwa.lua).

    It decodes the NGWA IPv4 option (type 33, length 6, a 32-bit window in
    bytes) into the fields ngwa.window and ngwa.unset, flags malformed ones,
    and has a preference for the option type (ngwa.option_type).

    \b
    Examples:
      tcpvar wireshark install
      tshark -r capture.pcap -Y "ngwa.window < 50000" -T fields -e frame.number -e ngwa.window
    """


@wireshark.command(short_help="Put the NGWA dissector where Wireshark loads plugins.")
@click.option("--dir", "target", type=click.Path(file_okay=False), metavar="DIR",
              help="Install into DIR instead of Wireshark's personal Lua plugin folder "
                   "(what `tshark -G folders` calls \"Personal Lua Plugins\", usually "
                   "~/.local/lib/wireshark/plugins).")
def install(target):
    """Copy the NGWA dissector (ngwa.lua) into Wireshark's personal Lua
    plugin folder, so that every Wireshark and tshark started afterwards by
    this user decodes the NGWA IPv4 option. An older copy is replaced; the
    folder is created if needed. Then tshark is asked whether it loads it.

    \b
    Examples:
      tcpvar wireshark install
      tcpvar wireshark install --dir /usr/lib/x86_64-linux-gnu/wireshark/plugins
      tshark -r capture.pcap -Y ngwa -T fields -e frame.number -e ngwa.window -e ngwa.unset
    """
    from tcpvar.pipelines.wireshark import install as do_install
    from tcpvar.report import terminal

    done = do_install(target)
    terminal.data(f"{'installed' if done.changed else 'already installed'}: {done.path}")
    if done.loaded is False:
        terminal.warn(f"tshark does not list the ngwa protocol after the install; "
                      f"check `tshark -G folders` and {done.path}")
    elif not done.in_wireshark_dir:
        terminal.note(f"Wireshark loads personal Lua plugins from {done.wireshark_dir}; "
                      f"from {done.path.parent} it needs `-X lua_script:{done.path}`")
