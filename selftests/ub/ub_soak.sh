#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The fault soak (scripts/soak runs it; not part of the suite): ROUNDS
# rounds (ubtest.soak_rounds=N, default 8) on the default fabric topology's
# two guests. In each round vm1 streams checksummed messages of 1 B to 64 KiB
# to vm0 over a new RTP channel, the retransmission combination changing
# every round (Go-Back-N or selective, with or without fast
# retransmission), while vm0 has the fabric inject the round's fault:
#
#   BER 1e-6, 1e-5 or 1e-4 on both of vm0's links; 1 % drops, 1 %
#   reordering or 1 % duplication in both switches; the controller's
#   hostile cases (RX and TX heads out of range, a completion written
#   twice) armed on vm0's port 0; and, once the stream's data flows,
#   vm0's port 0 flapped twice, vm0's port 1 taken down (up again after
#   the round), or a retrain storm (both of vm0's links flapped five
#   times).
#
# ub-tp recv checks every message arrives exactly once, in order and
# intact; ub-tp send that every message was acknowledged. Under the two
# hard faults (BER 1e-4, the retrain storm) a channel may instead fail with
# a reported error (the retry limit: ETIMEDOUT), as the debug kernel's
# guests do: then what the receiver got must be intact, a prefix of the
# stream. Before each stream vm0, listening, sends vm1 a one-message "go"
# (key 600 + round), so a round that ended in an error cannot leave the
# guests out of step. Every fourth
# round both guests unload and reload ub.ko (rmmod / insmod) and configure
# again. At the end ub.ko unloads: nothing kept a reference. On the debug
# kernel the harness fails the run on any kernel report, and kmemleak is
# scanned at the end of the run.
#
# Skips (exit 4) without a UB controller, ubctl or ub-tp, or without the
# peer guest.

DIR=$(dirname "$0")
. "$DIR/../kselftest/ktap_helpers.sh"
. "$DIR/ub_lib.sh"

UBTP=$(command -v ub-tp)
# Messages per round (ubtest.soak_count=N, default 200: a stream long
# enough for the faults that strike once its data flows).
COUNT=$(sed -n 's/.*ubtest.soak_count=\([0-9]*\).*/\1/p' /proc/cmdline)
COUNT=${COUNT:-200}

ktap_print_header
ub_require ubctl ub-tp
ub_require_peer

rounds=$(sed -n 's/.*ubtest.soak_rounds=\([0-9]*\).*/\1/p' /proc/cmdline)
rounds=${rounds:-8}
# Faults in turn, one per round.
FAULTS="ber6 drop ber5 reorder flap duplicate down ber4 storm hostile"
nfaults=10

fault_of() { # ROUND
	i=$(($1 % nfaults + 1))
	echo $FAULTS | cut -d' ' -f$i
}
mode_of() { # ROUND
	case $(($1 % 4)) in
	0) echo "--retransmit sr --fast-retransmit" ;;
	1) echo "--retransmit gbn" ;;
	2) echo "--retransmit sr" ;;
	*) echo "--retransmit gbn --fast-retransmit" ;;
	esac
}
# Waits until channel KEY carries data; gives up once the receiver PID
# is done (a short stream may end before it is seen) or after 60 s.
wait_stream() { # KEY PID
	i=0
	until ub_channel_field "$1" tpn > /dev/null; do
		i=$((i + 1))
		[ $i -le 1200 ] && kill -0 "$2" 2> /dev/null || return 1
		sleep 0.05
	done
}
# vm0 sets the round's fault: a condition from before the stream starts,
# an event once the stream's data flows (in the background).
fault_on() { # FAULT KEY RECEIVER_PID
	case $1 in
	ber6 | ber5 | ber4)
		fabric link vm0.0 --ber "1e-${1#ber}"
		fabric link vm0.1 --ber "1e-${1#ber}"
		;;
	drop | reorder | duplicate)
		fabric switch sw0 --"$1" 0.01
		fabric switch sw1 --"$1" 0.01
		;;
	flap) (wait_stream "$2" "$3" && fabric link vm0.0 --flap && fabric link vm0.0 --flap) > /dev/null & ;;
	down) (wait_stream "$2" "$3" && fabric link vm0.1 --down) > /dev/null & ;;
	storm)
		(wait_stream "$2" "$3" && for _ in 1 2 3 4 5; do
			fabric link vm0.0 --flap
			fabric link vm0.1 --flap
		done) > /dev/null &
		;;
	hostile)
		fabric hostile vm0.0 rx-head-out-of-range --count 2
		fabric hostile vm0.0 tx-head-out-of-range --count 2
		fabric hostile vm0.0 rx-double-completion --count 1
		;;
	esac
}
fault_off() { # FAULT
	wait
	case $1 in
	ber6 | ber5 | ber4)
		fabric link vm0.0 --ber 0
		fabric link vm0.1 --ber 0
		;;
	drop | reorder | duplicate)
		fabric switch sw0 --"$1" 0
		fabric switch sw1 --"$1" 0
		;;
	down) fabric link vm0.1 --up ;;
	hostile) fabric hostile vm0.0 rx-head-out-of-range --count 0 ;;
	esac
	return 0
}

# Faults under which a channel may end with a reported error (the links
# spend the stream retrying or down): BER 1e-4 and the retrain storm.
hard() { [ "$1" = ber4 ] || [ "$1" = storm ]; }
# Whether what the receiver got (its summary line) is intact: nothing
# corrupt, duplicated or out of order, whether or not it got everything.
intact() { # FILE
	grep -q 'corrupt 0, out-of-order 0, duplicates 0' "$1"
}
round() { # ROUND
	r=$1
	key=$((400 + r))
	ready=$((600 + r))
	f=$(fault_of "$r")
	# shellcheck disable=SC2046
	set -- $(mode_of "$r")
	if [ "$guest" = 0 ]; then
		"$UBTP" recv --dev 0 --from "$them" --key $key --count "$COUNT" --sizes 1-65536 \
			--seed $key --timeout-ms 600000 --idle-timeout-ms 30000 --info "$@" \
			> /tmp/ub-soak.out 2>&1 &
		rcv=$!
		# Listening: tell the sender (a stream that ends before the
		# receiver binds is dropped with the channel, ub_tp.sh), then
		# strike.
		sleep 0.5
		"$UBTP" send --dev 0 --to "$them" --key $ready --count 1 --sizes 1 \
			--timeout-ms 60000 > /tmp/ub-soak-ready.out 2>&1
		fault_on "$f" $key $rcv
		wait $rcv
		rc=$?
		fault_off "$f"
	else
		"$UBTP" recv --dev 0 --from "$them" --key $ready --count 1 --sizes 1 \
			--timeout-ms 600000 --idle-timeout-ms 600000 > /tmp/ub-soak-ready.out 2>&1 ||
			{ echo "# round $r: no word from vm0"; return 1; }
		"$UBTP" send --dev 0 --to "$them" --key $key --count "$COUNT" --sizes 1-65536 \
			--seed $key --timeout-ms 600000 --info "$@" > /tmp/ub-soak.out 2>&1
		rc=$?
	fi
	echo "# round $r: fault $f, $*"
	grep '^ub-tp' /tmp/ub-soak-ready.out | sed 's/^/# go: /'
	grep -v '^{' /tmp/ub-soak.out | sed 's/^/# /'
	[ $rc -eq 0 ] && { [ "$guest" = 1 ] || intact /tmp/ub-soak.out; } && return 0
	# Under a hard fault a channel may fail, if it says so: the sender
	# with its cause, the receiver with whatever it got intact.
	if hard "$f"; then
		if [ "$guest" = 1 ]; then
			grep -q 'the channel failed' /tmp/ub-soak.out && echo "# (allowed under $f)" && return 0
		else
			intact /tmp/ub-soak.out && echo "# (allowed under $f: what arrived is intact)" && return 0
		fi
	fi
	return 1
}
reload() {
	rmmod ub && insmod "$MODULE" && ub_configure && ub_peer_answers
}
retries() {
	"$UBCTL" -j -s port show 0 | grep -o '"retry-req-sets":[0-9]*' | cut -d: -f2 |
		awk '{s += $1} END {print s + 0}'
}

reloads=$((rounds / 4))
ktap_set_plan $((rounds + reloads + 4))
ktap_test_result "insmod ub.ko" insmod "$MODULE"
ktap_test_result "configure" ub_configure
ktap_test_result "the peer answers" ub_peer_answers
r=0
while [ $r -lt "$rounds" ]; do
	ktap_test_result "round $r: $(fault_of $r), $(mode_of $r | tr -d -), every message once and intact" round $r
	r=$((r + 1))
	if [ $((r % 4)) -eq 0 ]; then
		ktap_test_result "reload ub.ko after round $((r - 1))" reload
	fi
done
echo "# link retries over the soak: $(retries) Retry_Req_Sets on this guest's ports since the last load"
ktap_test_result "rmmod ub (nothing kept a reference)" rmmod ub
ktap_finished
