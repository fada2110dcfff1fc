#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# ubctl against ub.ko driving the emulated controller of this guest
# (ub-fabric, default topology: ports 0 and 1 on two switch planes): every
# command, text and JSON, the negotiated link parameters, the extended ACK
# of a refusal, usage errors, port events on the monitor group, and ping
# over UTP through the fabric (to this guest's own address, which the
# switches route back, and to the peer guest). The malformed-request batch
# is ub_nlcheck.sh.
#
# Skips (exit 4) without a UB controller.

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"
. "$DIR/ub_lib.sh"

ktap_print_header
ub_require ubctl

# ok: ubctl ARGS succeeds; its output is shown as diagnostics.
ok() {
	out=$("$UBCTL" "$@" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	return $rc
}
# shows PATTERN ARGS: ubctl ARGS succeeds and prints PATTERN.
shows() {
	pat=$1
	shift
	ok "$@" && echo "$out" | grep -q -- "$pat"
}
# refused STATUS PATTERN ARGS: ubctl ARGS exits STATUS and says PATTERN.
refused() {
	want=$1
	pat=$2
	shift 2
	out=$("$UBCTL" "$@" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	echo "# exit status $rc"
	[ "$rc" -eq "$want" ] && echo "$out" | grep -q -- "$pat"
}
t_dev_json() { shows '"ports":2' -j dev show 0; }
t_dev_name() {
	name=$("$UBCTL" -j dev show 0 | sed -n 's/.*"name":"\([^"]*\)".*/\1/p')
	[ -n "$name" ] && shows '"index":0' -j dev show "$name" && shows "^0/1:" port show "$name/1"
}
# Every port in DLL_Normal (links come up once the switch ports and this
# port are enabled; the peer guest boots at the same time).
links_up() { ub_links_up "${dev:-0}"; }
# The negotiated Init Block parameters are those both ends configure: the
# driver's LinkConfig defaults (8 flits per cell, all 16 VLs, FEATURE_ID 1).
t_port_json() {
	shows '"dll-state":"normal"' -j port show 0/1 && shows '"cell-flits":8' -j port show 0/0 &&
		shows '"vl-enable":65535' -j port show 0/0 && shows '"feature-id":1' -j port show 0/1
}
t_port_stats() { shows '"link-stats"' -j -s port show 0/1; }
t_addr() {
	ok addr add 0 cna16:0x0100 && ok addr add 0 10.9.9.9 &&
		shows '{"type":"ipv4","ipv4":"10.9.9.9"}' -j addr show 0 &&
		ok addr del 0 10.9.9.9 && ok addr del 0 cna16:0x0100
}
t_route() {
	ok route add 0 10.1.0.0/16 ports 0,1 per-packet &&
		shows 'dev 0 10.1.0.0/16 ports 0,1 per-packet' route show &&
		shows '"load-balance":"per-packet"' -j route show 0 &&
		ok route del 0 10.1.0.0/16
}
t_npi() { ok npi set 0 npi 5 && shows '"npi":5' -j dev show 0 && ok npi set 0 npi 1; }
t_no_dev() { refused 1 'No such device: .* \[attribute port.dev-index\]' port set 9/0 up; }
t_host_bits() { refused 1 'ubctl: route-add: .*\[attribute route.dst\]' route add 0 10.1.2.3/16 ports 0; }
t_usage() { refused 2 'out of range (0-63)' port show 0/64 && refused 2 'IPv4 or IPv6' ping cna16:0x0100; }
t_config() { ok addr add 0 "$me" && ok route add 0 10.0.0.0/16 ports 0,1 per-packet; }
t_ping_self() { shows '20 packets transmitted, 20 received, 0% packet loss' ping -c 20 -i 0.05 -I 0 "$me"; }
# The largest echo: its DLLDP spans more than one RX buffer (CAP_XFER is
# 2560 bytes), so the port reassembles it across buffers.
t_ping_big() {
	shows '10 packets transmitted, 10 received, 0% packet loss' ping -c 10 -s 4096 -i 0.05 -I 0 "$me"
}
# The peer configures its address at about the same time: wait for its
# first answer, then require a lossless run.
t_ping_peer() {
	ub_peer_answers 30 &&
		shows '100 packets transmitted, 100 received, 0% packet loss' ping -c 100 -i 0.02 -I 0 "$them"
}
# Sum of a link counter over both ports.
link_stat() {
	"$UBCTL" -j -s port show 0 | grep -o "\"$1\":[0-9]*" | awk -F: '{ s += $2 } END { print s + 0 }'
}
# BER 1e-5 on both links of this guest: the link layer repairs every bit
# error (its retry counters move), so not one echo is lost.
t_ber() {
	before=$(link_stat retry-req-sets)
	fabric link "vm$guest.0" --ber 1e-5
	fabric link "vm$guest.1" --ber 1e-5
	sleep 2
	shows '1000 packets transmitted, 1000 received, 0% packet loss' ping -c 1000 -i 0.01 -I 0 "$target"
	rc=$?
	after=$(link_stat retry-req-sets)
	crc=$(link_stat rx-crc-errors)
	echo "# retry-req-sets $before -> $after, rx-crc-errors $crc"
	fabric link "vm$guest.0" --ber 0
	fabric link "vm$guest.1" --ber 0
	# A lost echo must say where it went: every layer's counters.
	[ $rc -eq 0 ] || "$UBCTL" stats 0 | sed 's/^/# /'
	[ $rc -eq 0 ] && [ "$after" -gt "$before" ]
}
# Port 1's link pulled at the fabric while pings run: the echoes continue
# over plane 0, losing at most what was in flight on port 1, and the
# monitor group announces the link-down.
t_port_down() {
	"$UBCTL" -j monitor > /tmp/ubctl-down.out 2>&1 &
	mon=$!
	"$UBCTL" ping -c 300 -i 0.02 -I 0 "$target" > /tmp/ubctl-ping.out 2>&1 &
	png=$!
	sleep 1
	fabric link "vm$guest.1" --down
	wait "$png"
	sed 's/^/# /' /tmp/ubctl-ping.out
	kill "$mon" 2>/dev/null
	wait "$mon" 2>/dev/null
	sed 's/^/# monitor: /' /tmp/ubctl-down.out
	fabric link "vm$guest.1" --up
	got=$(sed -n 's/.* \([0-9]*\) received.*/\1/p' /tmp/ubctl-ping.out)
	echo "# $got of 300 echoes came back"
	grep '"event":"link-down"' /tmp/ubctl-down.out | grep -q '"index":1' && [ "${got:-0}" -ge 290 ]
}
# After the cable is back, port 1 reaches DLL_Normal again.
t_port_back() {
	i=0
	until "$UBCTL" -j port show 0/1 | grep -q '"dll-state":"normal"'; do
		i=$((i + 1))
		[ $i -le 300 ] || return 1
		sleep 0.1
	done
}

t_monitor() {
	"$UBCTL" -j monitor -c 2 > /tmp/ubctl-monitor.out 2>&1 &
	pid=$!
	sleep 1
	"$UBCTL" port set 0/0 down && sleep 1 && "$UBCTL" port set 0/0 up
	i=0
	while kill -0 "$pid" 2>/dev/null && [ $i -lt 300 ]; do
		i=$((i + 1))
		sleep 0.1
	done
	kill "$pid" 2>/dev/null
	wait "$pid"
	sed 's/^/# /' /tmp/ubctl-monitor.out
	grep -q '"event":"link-down"' /tmp/ubctl-monitor.out && grep -q '"event":"link-up"' /tmp/ubctl-monitor.out
}
t_stats() { shows '"echo-requests"' -j stats 0; }
# Unbinding the controller while pings run: the pings fail cleanly (the
# device is gone), no kernel report; binding it again brings the links
# back and the device answers again once configured.
t_unbind() {
	pci=$(basename "$(readlink -f /sys/bus/pci/drivers/ub/0000:* 2>/dev/null | head -1)")
	[ -n "$pci" ] || return 1
	"$UBCTL" ping -c 400 -i 0.005 -W 1 -I 0 "$me" > /dev/null 2>&1 &
	png=$!
	sleep 0.5
	echo "$pci" > /sys/bus/pci/drivers/ub/unbind || return 1
	wait "$png"
	[ ! -e "/sys/bus/pci/drivers/ub/$pci" ] || return 1
	echo "$pci" > /sys/bus/pci/drivers/ub/bind || return 1
	# A device index is never reused while the module is loaded: the
	# controller comes back under a new one.
	dev=$("$UBCTL" -j dev show | grep -o '"index":[0-9]*' | head -1 | cut -d: -f2)
	echo "# the controller is device $dev again"
	[ -n "$dev" ] && [ "$dev" != 0 ] && links_up && ok addr add "$dev" "$me" &&
		ok route add "$dev" 10.0.0.0/16 ports 0,1 per-packet &&
		shows '5 packets transmitted, 5 received' ping -c 5 -i 0.05 -I "$dev" "$me"
}
# rmmod while pings run.
t_rmmod_busy() {
	"$UBCTL" ping -c 400 -i 0.005 -W 1 -I "${dev:-0}" "$me" > /dev/null 2>&1 &
	png=$!
	sleep 0.5
	rmmod ub
	rc=$?
	wait "$png"
	[ $rc -eq 0 ] && [ ! -d /sys/module/ub ]
}

ktap_set_plan 24
ktap_test_result "insmod ub.ko" insmod "$MODULE"
ktap_test_result "dev show -j" t_dev_json
ktap_test_result "a device by its name" t_dev_name
ktap_test_result "every port reaches DLL_Normal" links_up
ktap_test_result "port show -j: state and negotiated parameters" t_port_json
ktap_test_result "port show -j -s has the counters" t_port_stats
ktap_test_result "addr add/show/del" t_addr
ktap_test_result "route add/show/del" t_route
ktap_test_result "npi set keeps the mode" t_npi
ktap_test_result "unknown device: extack message and attribute" t_no_dev
ktap_test_result "host bits past the prefix: kernel's extack" t_host_bits
ktap_test_result "usage errors exit 2" t_usage
ktap_test_result "address $me and a route over both planes" t_config
ktap_test_result "ping $me (through the switches and back)" t_ping_self
ktap_test_result "ping -s 4096 $me: DLLDPs longer than an RX buffer" t_ping_big
if grep -qw ubtest.solo=1 /proc/cmdline; then
	ktap_test_skip "ping the peer guest $them (no peer guest: ubtest.solo=1)"
else
	ktap_test_result "ping the peer guest $them" t_ping_peer
fi
# The fault cases ping the peer, or this guest's own address without one.
target=$them
grep -qw ubtest.solo=1 /proc/cmdline && target=$me
ktap_test_result "BER 1e-5 on both links: ping -c 1000 loses nothing, link retries > 0" t_ber
if grep -qw ubtest.solo=1 /proc/cmdline; then
	# An echo to this guest's own address leaves by one plane and comes
	# back by the other (a switch never sends a packet out of the port it
	# came in by): with one plane down it has no way back.
	ktap_test_skip "port 1 down at the fabric (needs the peer guest: ubtest.solo=1)"
else
	ktap_test_result "port 1 down at the fabric: pings continue over port 0, link-down on monitor" t_port_down
fi
ktap_test_result "port 1 back up: DLL_Normal again" t_port_back
ktap_test_result "monitor shows link-down and link-up" t_monitor
ktap_test_result "stats -j" t_stats
ktap_test_result "completion" ok completion bash
ktap_test_result "unbind the controller while pings run, bind it again" t_unbind
ktap_test_result "rmmod ub while pings run" t_rmmod_busy
ktap_finished
