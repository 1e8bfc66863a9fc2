//! Listening TCP ports of a set of processes: the socket inodes behind their
//! descriptors (`/proc/<pid>/fd`), looked up in `/proc/net/tcp` and
//! `/proc/net/tcp6` among the sockets in state LISTEN.

use std::collections::{BTreeSet, HashSet};
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::registry::control::ListeningPort;

/// `/proc/net/tcp*`'s state code for LISTEN.
const TCP_LISTEN: &str = "0A";

/// The TCP ports `pids` listen on, ordered by port then address, without
/// repeats. Processes that are gone or not readable are skipped.
pub(crate) fn listening_ports(pids: &[i32]) -> Vec<ListeningPort> {
    let inodes = socket_inodes(pids);
    if inodes.is_empty() {
        return Vec::new();
    }
    let mut found = BTreeSet::new();
    for (file, v6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
        let Ok(table) = std::fs::read_to_string(file) else {
            continue;
        };
        found.extend(parse_listening(&table, v6, &inodes));
    }
    found.into_iter().collect()
}

fn socket_inodes(pids: &[i32]) -> HashSet<u64> {
    let mut inodes = HashSet::new();
    for pid in pids {
        let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(target) = std::fs::read_link(entry.path()) else {
                continue;
            };
            let target = target.to_string_lossy();
            if let Some(inode) = target
                .strip_prefix("socket:[")
                .and_then(|rest| rest.strip_suffix(']'))
                .and_then(|n| n.parse().ok())
            {
                inodes.insert(inode);
            }
        }
    }
    inodes
}

/// The listening sockets of one `/proc/net/tcp*` table whose inode is in `inodes`.
fn parse_listening(table: &str, v6: bool, inodes: &HashSet<u64>) -> Vec<ListeningPort> {
    table
        .lines()
        .skip(1)
        .filter_map(|row| {
            let fields: Vec<&str> = row.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if fields.len() < 10 || fields[3] != TCP_LISTEN {
                return None;
            }
            let inode: u64 = fields[9].parse().ok()?;
            if !inodes.contains(&inode) {
                return None;
            }
            let (address, port) = fields[1].split_once(':')?;
            let port = u16::from_str_radix(port, 16).ok()?;
            let address = if v6 {
                ipv6_from_proc(address)?.to_string()
            } else {
                ipv4_from_proc(address)?.to_string()
            };
            Some(ListeningPort { port, address })
        })
        .collect()
}

/// The kernel prints an IPv4 address as one 32-bit word in host byte order.
fn ipv4_from_proc(hex: &str) -> Option<Ipv4Addr> {
    let word = u32::from_str_radix(hex, 16).ok()?;
    Some(Ipv4Addr::from(u32::from_be_bytes(word.to_ne_bytes())))
}

/// An IPv6 address as four 32-bit words, each in host byte order.
fn ipv6_from_proc(hex: &str) -> Option<Ipv6Addr> {
    if hex.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(4).enumerate() {
        let word = u32::from_str_radix(&hex[i * 8..i * 8 + 8], 16).ok()?;
        chunk.copy_from_slice(&word.to_ne_bytes());
    }
    Some(Ipv6Addr::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_parse_to_addresses_and_ports() {
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 99 1\n   2: 0100007F:1F41 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 4243 1\n";
        let inodes: HashSet<u64> = [4242, 4243].into();
        assert_eq!(
            parse_listening(v4, false, &inodes),
            vec![ListeningPort {
                port: 8000,
                address: "127.0.0.1".to_owned()
            }]
        );
        let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 7 1\n   1: 00000000000000000000000000000000:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 8 1\n";
        let inodes: HashSet<u64> = [7, 8].into();
        let ports = parse_listening(v6, true, &inodes);
        assert_eq!(ports[0].address, "::1");
        assert_eq!(ports[0].port, 8080);
        assert_eq!(ports[1].address, "::");
    }
}
