// SPDX-License-Identifier: GPL-2.0
//! The Rust mirrors against the C header: a C program compiled against
//! `include/uapi/linux/ub.h` prints every struct's size and field offsets,
//! the ioctl numbers and the constants, and each must equal the Rust value.
//! Skipped, saying why, only when the machine has no C compiler.

use std::collections::HashMap;
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use ub_tp::uapi::*;

const FIELDS: &[(&str, &str)] = &[
    ("ub_addr", "type"),
    ("ub_addr", "reserved"),
    ("ub_addr", "addr"),
    ("ub_tp_bind", "version"),
    ("ub_tp_bind", "dev_index"),
    ("ub_tp_bind", "remote"),
    ("ub_tp_bind", "key"),
    ("ub_tp_bind", "flags"),
    ("ub_tp_bind", "timeout_ms"),
    ("ub_tp_bind", "retransmit"),
    ("ub_tp_bind", "reserved0"),
    ("ub_tp_bind", "attr_flags"),
    ("ub_tp_bind", "mtu"),
    ("ub_tp_bind", "tpn"),
    ("ub_tp_bind", "peer_tpn"),
    ("ub_tp_bind", "max_message"),
    ("ub_tp_bind", "members"),
    ("ub_tp_bind", "reserved"),
    ("ub_tp_info", "version"),
    ("ub_tp_info", "state"),
    ("ub_tp_info", "error"),
    ("ub_tp_info", "tpn"),
    ("ub_tp_info", "peer_tpn"),
    ("ub_tp_info", "rx_queued"),
    ("ub_tp_info", "tx_messages"),
    ("ub_tp_info", "tx_acked"),
    ("ub_tp_info", "rx_messages"),
    ("ub_tp_info", "tx_packets"),
    ("ub_tp_info", "rx_packets"),
    ("ub_tp_info", "rtx_fast"),
    ("ub_tp_info", "rtx_rto"),
    ("ub_tp_info", "rtx_mark_psn"),
    ("ub_tp_info", "rtx_go_back_n"),
    ("ub_tp_info", "rto_expiries"),
    ("ub_tp_info", "rx_duplicates"),
    ("ub_tp_info", "rx_invalid_psn"),
    ("ub_tp_info", "members"),
    ("ub_tp_info", "reserved1"),
    ("ub_tp_info", "rx_dropped"),
    ("ub_tp_info", "reserved"),
];

const CONSTANTS: &[(&str, u64)] = &[
    ("UB_UDP_DPORT", UB_UDP_DPORT as u64),
    ("UB_TP_ABI_VERSION", UB_TP_ABI_VERSION as u64),
    ("UB_ADDR_NONE", UB_ADDR_NONE as u64),
    ("UB_ADDR_CNA16", UB_ADDR_CNA16 as u64),
    ("UB_ADDR_CNA24", UB_ADDR_CNA24 as u64),
    ("UB_ADDR_IPV4", UB_ADDR_IPV4 as u64),
    ("UB_ADDR_IPV6", UB_ADDR_IPV6 as u64),
    ("UB_TP_BIND_LISTEN", UB_TP_BIND_LISTEN as u64),
    ("UB_TP_BIND_CTP", UB_TP_BIND_CTP as u64),
    ("UB_TP_BIND_FLAGS", UB_TP_BIND_FLAGS as u64),
    ("UB_TP_MAX_MEMBERS", UB_TP_MAX_MEMBERS as u64),
    ("UB_TP_GROUP_HEADER", UB_TP_GROUP_HEADER as u64),
    ("UB_TP_CTP_HANDLE_BASE", UB_TP_CTP_HANDLE_BASE as u64),
    ("UB_TP_GO_BACK_N", UB_TP_GO_BACK_N as u64),
    ("UB_TP_SELECTIVE", UB_TP_SELECTIVE as u64),
    ("UB_TP_FAST_RETRANSMIT", UB_TP_FAST_RETRANSMIT as u64),
    ("UB_TP_PER_PACKET", UB_TP_PER_PACKET as u64),
    ("UB_TP_ATTR_FLAGS", UB_TP_ATTR_FLAGS as u64),
    ("UB_TP_STATE_RESET", UB_TP_STATE_RESET as u64),
    ("UB_TP_STATE_RTR", UB_TP_STATE_RTR as u64),
    ("UB_TP_STATE_RTS", UB_TP_STATE_RTS as u64),
    ("UB_TP_STATE_SUSPENDED", UB_TP_STATE_SUSPENDED as u64),
    ("UB_TP_STATE_ERR", UB_TP_STATE_ERR as u64),
    ("UB_TP_STATE_CLOSED", UB_TP_STATE_CLOSED as u64),
    ("UB_TP_RX_QUEUE_BYTES", UB_TP_RX_QUEUE_BYTES as u64),
    ("UB_TP_IOC_BIND", UB_TP_IOC_BIND as u64),
    ("UB_TP_IOC_INFO", UB_TP_IOC_INFO as u64),
];

fn rust_layout() -> HashMap<String, u64> {
    let mut m = HashMap::new();
    let mut put = |k: &str, v: usize| m.insert(k.to_owned(), v as u64);
    put("sizeof ub_addr", size_of::<UbAddr>());
    put("sizeof ub_tp_bind", size_of::<UbTpBind>());
    put("sizeof ub_tp_info", size_of::<UbTpInfo>());
    put("ub_addr.type", offset_of!(UbAddr, type_));
    put("ub_addr.reserved", offset_of!(UbAddr, reserved));
    put("ub_addr.addr", offset_of!(UbAddr, addr));
    macro_rules! fields {
        ($ty:ident, $c:literal, $($f:ident),*) => {
            $(put(concat!($c, ".", stringify!($f)), offset_of!($ty, $f));)*
        };
    }
    fields!(
        UbTpBind,
        "ub_tp_bind",
        version,
        dev_index,
        remote,
        key,
        flags,
        timeout_ms,
        retransmit,
        reserved0,
        attr_flags,
        mtu,
        tpn,
        peer_tpn,
        max_message,
        members,
        reserved
    );
    fields!(
        UbTpInfo,
        "ub_tp_info",
        version,
        state,
        error,
        tpn,
        peer_tpn,
        rx_queued,
        tx_messages,
        tx_acked,
        rx_messages,
        tx_packets,
        rx_packets,
        rtx_fast,
        rtx_rto,
        rtx_mark_psn,
        rtx_go_back_n,
        rto_expiries,
        rx_duplicates,
        rx_invalid_psn,
        members,
        reserved1,
        rx_dropped,
        reserved
    );
    for (k, v) in CONSTANTS {
        m.insert((*k).to_owned(), *v);
    }
    m
}

fn c_program() -> String {
    let mut s = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <linux/ub.h>\nint main(void)\n{\n",
    );
    for st in ["ub_addr", "ub_tp_bind", "ub_tp_info"] {
        s += &format!("\tprintf(\"sizeof {st} %zu\\n\", sizeof(struct {st}));\n");
    }
    for (st, f) in FIELDS {
        s += &format!("\tprintf(\"{st}.{f} %zu\\n\", offsetof(struct {st}, {f}));\n");
    }
    for (c, _) in CONSTANTS {
        s += &format!("\tprintf(\"{c} %llu\\n\", (unsigned long long)({c}));\n");
    }
    s + "\treturn 0;\n}\n"
}

#[test]
fn rust_mirrors_match_the_c_header() {
    if Command::new("cc").arg("--version").output().is_err() {
        println!("SKIPPED: no C compiler (cc) on this machine; the const asserts in src/uapi.rs still hold");
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let include = root.join("include/uapi");
    assert!(
        include.join("linux/ub.h").exists(),
        "{} has no linux/ub.h",
        include.display()
    );
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("ub_tp_abi.c");
    let exe = dir.join("ub_tp_abi");
    std::fs::write(&src, c_program()).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    // The tree's include/uapi comes first; linux/ioctl.h and linux/types.h
    // come from the system's /usr/include.
    let out = Command::new("cc")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(&include)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("cc: {e}"));
    assert!(
        out.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&exe)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", exe.display()));
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let rust = rust_layout();
    let mut seen = 0;
    for line in text.lines() {
        let (k, v) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad line {line}"));
        let v: u64 = v.parse().unwrap_or_else(|_| panic!("bad value {line}"));
        assert_eq!(rust.get(k), Some(&v), "{k}: C says {v}");
        seen += 1;
    }
    assert_eq!(seen, rust.len(), "every Rust value was compared");
    // The sizes worked out by hand from the header.
    assert_eq!(rust.get("sizeof ub_addr"), Some(&20));
    assert_eq!(rust.get("sizeof ub_tp_bind"), Some(&96));
    assert_eq!(rust.get("sizeof ub_tp_info"), Some(&168));
}
