"""The Wireshark dissector for the NGWA IPv4 option (ngwa.lua), shipped as
package data (tcpvar.dissectors) so that `tcpvar wireshark install` finds it."""
