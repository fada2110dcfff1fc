#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# CTP between the two guests of the back-to-back topology (vm0.0 <-> vm1.0,
# no switch), under BER 1e-5 on the link: vm1 sends (ub-tp send --ctp), vm0
# receives (ub-tp recv --ctp) a stream of checksummed datagrams of 1 B to
# the largest CTP payload; every one must arrive exactly once, in order and
# intact, although CTP neither acknowledges nor retransmits: the link layer
# (BCRC and the retry buffer) repairs every corrupted flit, which the
# ports' Retry_Req_Sets / Retry_Ack_Sets show, and nothing is dropped (the
# receiver's rx_dropped and ICRC drops stay 0).
#
# Skips (exit 4) without a UB controller, ub-tp or ubctl, without the
# peer guest (ubtest.solo=1), or on a topology whose device has more than
# one port (the default one: CTP over switches is not this test).

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"

. "$DIR/ub_lib.sh"

UBTP=$(command -v ub-tp)
COUNT=${UB_CTP_COUNT:-300}
SEED=${UB_CTP_SEED:-7}
# This guest's and the peer's 16-bit CNA (Documentation/ub/fabric.rst,
# "Addresses": host h is (h+1) << 8).
me_cna=cna16:0x0$((guest + 1))00
them_cna=cna16:0x0$((peer + 1))00

ktap_print_header
ub_require ubctl ub-tp
ub_require_peer

insmod "$MODULE" || {
	ktap_skip_all "insmod failed"
	exit "$KSFT_SKIP"
}
ports=$("$UBCTL" -j dev show 0 | sed -n 's/.*"ports":\([0-9]*\).*/\1/p')
if [ "$ports" != 1 ]; then
	rmmod ub
	ktap_skip_all "device 0 has ${ports:-no} ports: CTP runs on the back-to-back topology (one port)"
	exit "$KSFT_SKIP"
fi

ktap_set_plan 9

# ktap_test_result runs its command unquoted ($@): each test is one word.
link_up() {
	i=0
	until "$UBCTL" -j port show 0 | grep -q '"dll-state":"normal"'; do
		i=$((i + 1))
		[ $i -le 600 ] || return 1
		sleep 0.1
	done
}
# The CNA for CTP, an IPv4 address for the echo that checks the peer is
# there, and a route for each over the one port.
t_config() {
	link_up && "$UBCTL" addr add 0 "$me_cna" && "$UBCTL" addr add 0 "$me" &&
		"$UBCTL" route add 0 "${them_cna}/16" ports 0 &&
		"$UBCTL" route add 0 10.0.0.0/16 ports 0
}
t_peer() { ub_peer_answers; }
# CTP refusals that need a bound file (ub-tp abi-check --ctp); vm0 only.
t_abi() {
	[ "$guest" = 0 ] || { echo "# vm0 runs it"; return 0; }
	"$UBTP" abi-check --ctp --dev 0 > /tmp/ub-ctp-abi.out 2>&1
	rc=$?
	sed 's/^/# /' /tmp/ub-ctp-abi.out
	return $rc
}
# Link layer retries of port 0: Retry_Req_Sets (this end saw a bad flit)
# plus Retry_Ack_Sets (this end replayed its retry buffer).
retries() {
	"$UBCTL" -j -s port show 0 | grep -Eo '"retry-(req|ack)-sets":[0-9]*' | cut -d: -f2 |
		awk '{s += $1} END {print s + 0}'
}
# A network-layer counter of device 0 (net-stats), e.g. icrc-drops.
net_stat() {
	"$UBCTL" -j -s dev show 0 | grep -o "\"$1\":[0-9]*" | cut -d: -f2
}
# One link, both directions: vm0 sets it.
t_ber() {
	retries_before=$(retries)
	icrc_before=$(net_stat icrc-drops)
	no_route_before=$(net_stat no-route-drops)
	[ "$guest" = 0 ] && fabric link vm0.0 --ber 1e-5
	sleep 1
	return 0
}
# vm0 binds at once; CTP has no handshake, so vm1 gives it time to, or
# its first datagrams would find no file bound to their source. Both ends
# wait in poll() (--poll): a read or write that says EAGAIN after poll()
# reported the file ready fails the run.
t_stream() {
	start=$(date +%s)
	if [ "$guest" = 0 ]; then
		"$UBTP" recv --ctp --dev 0 --from "$them_cna" --count "$COUNT" --sizes 1-64K \
			--seed "$SEED" --idle-timeout-ms 20000 --poll --info > /tmp/ub-ctp.out 2>&1
	else
		sleep 3
		"$UBTP" send --ctp --dev 0 --to "$them_cna" --count "$COUNT" --sizes 1-64K \
			--seed "$SEED" --poll --info > /tmp/ub-ctp.out 2>&1
	fi
	rc=$?
	sed 's/^/# /' /tmp/ub-ctp.out
	echo "# $COUNT datagrams in $(($(date +%s) - start)) s"
	# Where a datagram could have gone: the network layer's and the
	# port's counters.
	"$UBCTL" -j -s dev show 0 | grep -o '"net-stats":{[^}]*}' | sed 's/^/# /'
	"$UBCTL" -j -s port show 0 | sed 's/^/# /'
	return $rc
}
# Nothing was dropped: the sender had a route up for every datagram, no
# packet failed its ICRC (the link layer let no corrupted flit through)
# and no datagram found the receiver's queue full.
t_nothing_lost() {
	icrc=$(net_stat icrc-drops)
	no_route=$(net_stat no-route-drops)
	echo "# icrc-drops $icrc_before -> $icrc, no-route-drops $no_route_before -> $no_route"
	[ -n "$icrc" ] && [ "$icrc" = "$icrc_before" ] && [ "$no_route" = "$no_route_before" ] ||
		return 1
	[ "$guest" = 0 ] || return 0
	grep -q "rx_dropped 0$" /tmp/ub-ctp.out && grep -q "rx_packets $COUNT$" /tmp/ub-ctp.out
}
t_retries() {
	after=$(retries)
	echo "# link retries (retry-req-sets + retry-ack-sets) of port 0: $retries_before -> $after"
	[ "$after" -gt "$retries_before" ]
}
t_clear() {
	[ "$guest" = 0 ] && fabric link vm0.0 --ber 0
	return 0
}
# A CTP end made with ubctl (netlink tp-new, transport ctp), before any
# file: vm0 makes it towards vm1; ubctl tp show lists it under its handle
# (2^23 and above) as CTP, unclaimed, and its queue fills with the 40
# datagrams vm1 sends 3 s later; then ub-tp recv --ctp claims that very end
# (the same handle) and reads all 40, intact, in order; the end goes with
# the file. The BER is still on.
ctp_json() {
	"$UBCTL" -j -s tp show 0 "$1" 2> /dev/null
}
t_ctp_add() {
	if [ "$guest" = 1 ]; then
		sleep 3
		"$UBTP" send --ctp --dev 0 --to "$them_cna" --count 40 --sizes 1-4K --seed 71 \
			> /tmp/ub-ctp.out 2>&1
		rc=$?
		sed 's/^/# /' /tmp/ub-ctp.out
		return $rc
	fi
	h=$("$UBCTL" tp add 0 remote "$them_cna" transport ctp) || return 1
	echo "# ubctl tp add: handle $h"
	[ "$h" -ge 8388608 ] || return 1
	ctp_json "$h" | sed 's/^/# made: /'
	ctp_json "$h" | grep '"transport":"ctp"' | grep -q '"claimed":0' || return 1
	i=0
	until ctp_json "$h" | grep -q '"rx-queued":40,'; do
		i=$((i + 1))
		[ $i -le 200 ] || { echo "# never 40 queued: $(ctp_json "$h")"; return 1; }
		sleep 0.1
	done
	"$UBTP" recv --ctp --dev 0 --from "$them_cna" --count 40 --sizes 1-4K --seed 71 \
		--idle-timeout-ms 5000 --info > /tmp/ub-ctp.out 2>&1
	rc=$?
	sed 's/^/# /' /tmp/ub-ctp.out
	[ $rc -eq 0 ] && grep -q "tpn $h " /tmp/ub-ctp.out || return 1
	# The file closed: the end is gone.
	! ctp_json "$h" > /dev/null
}
# ubctl tp del of a CTP end a file holds: its reader fails with
# ECONNABORTED (after what was queued; nothing is), and the address is
# free again at once (a second tp add towards it works). vm0 only.
t_ctp_del() {
	[ "$guest" = 0 ] || return 0
	"$UBTP" recv --ctp --dev 0 --from "$them_cna" --count 1000 --sizes 1-4K --seed 72 \
		--idle-timeout-ms 30000 > /tmp/ub-ctp.out 2>&1 &
	rcv=$!
	i=0
	# One line per entry (they start with "dev-index"), the CTP one's tpn.
	until h=$("$UBCTL" -j tp show 0 2> /dev/null |
		awk '{ gsub(/\},\{"dev-index"/, "}\n{\"dev-index\""); print }' |
		grep '"transport":"ctp"' | grep -o '"tpn":[0-9]*' | cut -d: -f2 | grep .); do
		i=$((i + 1))
		[ $i -le 100 ] || { kill $rcv; return 1; }
		sleep 0.1
	done
	echo "# the file's end: handle $h"
	"$UBCTL" tp del 0 "$h" || { kill $rcv; return 1; }
	wait $rcv
	rc=$?
	sed 's/^/# /' /tmp/ub-ctp.out | tail -2
	[ $rc -ne 0 ] && grep -q ECONNABORTED /tmp/ub-ctp.out || return 1
	h2=$("$UBCTL" tp add 0 remote "$them_cna" transport ctp) && "$UBCTL" tp del 0 "$h2"
}

ktap_test_result "link up, CNA and IPv4 addresses and routes configured" t_config
ktap_test_result "the peer answers an echo" t_peer
ktap_test_result "ub-tp abi-check --ctp: refused CTP calls get their errno" t_abi
ktap_test_result "BER 1e-5 on the link" t_ber
ktap_test_result "$COUNT CTP datagrams vm1 -> vm0 arrive exactly once, in order, intact" t_stream
ktap_test_result "nothing dropped (no route drop, no ICRC drop, rx_dropped 0)" t_nothing_lost
ktap_test_result "the link layer repaired the errors (link retries > 0)" t_retries
ktap_test_result "ubctl tp add transport ctp: listed, queues the peer's datagrams, claimed by a bind" t_ctp_add
ktap_test_result "ubctl tp del of a CTP end: its reader gets ECONNABORTED, the address is free" t_ctp_del
t_clear
# The peer may still be reading its counters: leave the link up a moment.
sleep 2
rmmod ub

ktap_finished
