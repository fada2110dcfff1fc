//! The checked-in code of the "ub" generic netlink family
//! (`drivers/ub/ub_nl_gen.[ch]`, `include/uapi/linux/ub_netlink.h`,
//! `drivers/ub/ub_nl_uapi.rs`) is exactly what `scripts/ynl-regen` makes from
//! `Documentation/netlink/specs/ub.yaml` with the kernel tree's generator,
//! and netlink.rs bounds each handler's attribute table as the generated
//! ops do.
//!
//! Skipped (with a message) only when the kernel source is absent;
//! `scripts/test` runs `scripts/setup` first, so there it always runs.

use std::path::Path;
use std::process::Command;

#[test]
fn generated_netlink_code_matches_the_spec() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(root.join("scripts/ynl-regen"))
        .arg("--check")
        .output()
        .expect("scripts/ynl-regen runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match out.status.code() {
        Some(0) => {}
        Some(77) => eprintln!("SKIPPED (no kernel source, run scripts/setup): {text}"),
        _ => panic!("the generated netlink code is stale:\n{text}"),
    }
}
