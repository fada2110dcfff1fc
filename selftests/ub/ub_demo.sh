#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The README demo (scripts/demo runs it; TEST_PROGS_EXTENDED): TP Channels
# between the two guests of the default fabric topology through every kind
# of fault at once: BER 1e-5 on every link of both guests, 1 % drops and
# 1 % reordering in both switches, and vm1's plane 1 pulled down and back
# up during the last stream. vm1 sends, vm0 receives one stream of
# checksummed messages (1 B to 256 KiB) per retransmission combination.
#
# Each guest prints machine-readable lines for the host's report
# (ub-demo-report): `# demo: stats-before JSON` and `# demo: stats-after
# JSON` (ubctl -j stats: the network layer and every port's link
# counters), and `# demo: stream NAME JSON` (ub-tp -j --info: this end's
# message counts and its channel's retransmissions by cause).
#
# Skips (exit 4) without a UB controller, ub-tp or ubctl, or without the
# peer guest (ubtest.solo=1).

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"

. "$DIR/ub_lib.sh"

UBTP=$(command -v ub-tp)
# Messages per stream and their sizes (both ends derive the same sequence
# from the seed).
COUNT=${UB_DEMO_COUNT:-300}
SIZES=${UB_DEMO_SIZES:-1-262144}

ktap_print_header
ub_require ubctl ub-tp
ub_require_peer

# ktap_test_result runs its command unquoted ($@): each test is one word.
t_config() { ub_configure && ub_peer_answers; }
t_setup() { insmod "$MODULE" && t_config; }
# stats PHASE: this guest's counters as one `# demo:` line.
stats() {
	j=$("$UBCTL" -j stats 0 | tr -d '\n') || return 1
	echo "# demo: stats-$1 $j"
}
t_stats_before() { stats before; }
t_stats_after() { stats after; }
# The faults: each guest its own links; vm0 the switches.
t_faults() {
	fabric link "vm$guest.0" --ber 1e-5
	fabric link "vm$guest.1" --ber 1e-5
	if [ "$guest" = 0 ]; then
		fabric switch sw0 --drop 0.01 --reorder 0.01
		fabric switch sw1 --drop 0.01 --reorder 0.01
	fi
	sleep 2
}
t_clear() {
	fabric link "vm$guest.0" --ber 0
	fabric link "vm$guest.1" --ber 0
	if [ "$guest" = 0 ]; then
		fabric switch sw0 --drop 0 --reorder 0
		fabric switch sw1 --drop 0 --reorder 0
	fi
}
# progress TEXT: a line the host shows at once (`# ub-progress:` on the
# selftest stream: the guest's init prints a test's output only when the
# test ends).
progress() {
	echo "# ub-progress: $*" > /dev/ttyS1
}
# stream NAME KEY ARGS...: one channel named KEY, COUNT messages vm1 -> vm0;
# this end's ub-tp JSON goes on a `# demo: stream NAME` line.
stream() {
	name=$1
	key=$2
	shift 2
	if [ "$guest" = 0 ]; then
		"$UBTP" recv --dev 0 --from "$them" --key "$key" --count "$COUNT" --sizes "$SIZES" \
			--seed "$key" --timeout-ms 120000 --idle-timeout-ms 60000 --info -j "$@" \
			> /tmp/ub-demo.json 2> /tmp/ub-demo.err
	else
		"$UBTP" send --dev 0 --to "$them" --key "$key" --count "$COUNT" --sizes "$SIZES" \
			--seed "$key" --timeout-ms 120000 --info -j "$@" \
			> /tmp/ub-demo.json 2> /tmp/ub-demo.err
	fi
	rc=$?
	sed 's/^/# /' /tmp/ub-demo.err
	echo "# demo: stream $name $(tr -d '\n' < /tmp/ub-demo.json)"
	if [ "$guest" = 0 ]; then
		n=$(grep -o '"received":[0-9]*' /tmp/ub-demo.json | cut -d: -f2)
		secs=$(grep -o '"seconds":[0-9.]*' /tmp/ub-demo.json | cut -d: -f2 | cut -c1-5)
		verdict=ok
		[ $rc -eq 0 ] || verdict=FAILED
		progress "stream $name: $verdict, ${n:-0} of $COUNT messages intact, in order, once (${secs:-?} s)"
	fi
	return $rc
}
t_gbn() { stream gbn 301 --retransmit gbn; }
t_gbn_fast() { stream gbn+fast 302 --retransmit gbn --fast-retransmit; }
t_sr() { stream selective 303 --retransmit sr; }
# vm1's plane 1 goes down a second into the stream and comes back two
# seconds later: the channel carries on over plane 0 meanwhile.
t_sr_fast() {
	if [ "$guest" = 1 ]; then
		(
			sleep 1
			fabric link vm1.1 --down
			sleep 2
			fabric link vm1.1 --up
		) &
	fi
	stream selective+fast 304 --retransmit sr --fast-retransmit
	rc=$?
	[ "$guest" = 1 ] && wait
	return $rc
}

ktap_set_plan 10
ktap_test_result "insmod, links up, address and route, the peer answers" t_setup
ktap_test_result "counters before the faults" t_stats_before
ktap_test_result "faults on: BER 1e-5 on every link, 1 % drops and reordering in the switches" t_faults
ktap_test_result "Go-Back-N: $COUNT messages exactly once, intact" t_gbn
ktap_test_result "Go-Back-N, fast retransmit: exactly once, intact" t_gbn_fast
ktap_test_result "selective: exactly once, intact" t_sr
ktap_test_result "selective, fast retransmit, vm1's plane 1 down and up: exactly once, intact" t_sr_fast
ktap_test_result "counters after the streams" t_stats_after
t_clear
ktap_test_result "rmmod ub" rmmod ub
ktap_test_result "ub is gone" test ! -e /sys/module/ub
ktap_finished
