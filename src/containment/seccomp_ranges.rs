//! The calls a contained child may make whatever their arguments, as ranges of syscall
//! numbers checked ahead of seccompiler's program, which keeps only the calls allowed for
//! some arguments (and its architecture check, and EPERM for everything else). seccompiler
//! spends three or four instructions on each allowed call (1,217 for the child filter),
//! and the kernel checks, translates and JIT-compiles a filter at every install: about 0.6
//! µs an instruction, 0.7 ms of CPU for each contained command. Here each run of
//! consecutive allowed numbers costs two instructions. A test runs this program and
//! seccompiler's program of every rule over every syscall number (native, x32, foreign
//! architecture) with many arguments and requires the same answer from both.

use seccompiler::{sock_filter, BpfProgram};
use std::collections::BTreeSet;

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JA: u16 = 0x05;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGT_K: u16 = 0x25;
const BPF_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;

/// How many ranges share one pair of exits (`RET ALLOW`, the jump to the rest): a
/// conditional jump reaches at most 255 instructions ahead, and the first range of a group
/// jumps `2 * GROUP` to its exits.
const GROUP: usize = 100;

/// `allowed` as sorted inclusive ranges of consecutive numbers.
fn ranges(allowed: &BTreeSet<u32>) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &nr in allowed {
        match out.last_mut() {
            Some((_, hi)) if hi.checked_add(1) == Some(nr) => *hi = nr,
            _ => out.push((nr, nr)),
        }
    }
    out
}

/// A program that allows every call numbered in `allowed` on the native architecture and
/// hands every other call, and every call of another architecture, to `rest`, which must
/// end each call itself (seccompiler's program of the remaining rules, with its own
/// architecture check).
///
/// The numbers are compared in ascending ranges: above a range, the next one; within it,
/// allowed; below it (and so above the previous one), not among these. Each group of
/// ranges ends with its exits: a jump over them to the next group (or, after the last, to
/// `rest`, which follows), `RET ALLOW`, and a jump to `rest`.
pub fn with_allowed_ranges(allowed: &BTreeSet<u32>, rest: BpfProgram) -> BpfProgram {
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    let mut out = vec![
        ins(BPF_LD_W_ABS, 0, 0, 4),              // seccomp_data.arch
        ins(BPF_JEQ_K, 1, 0, super::AUDIT_ARCH), // native: on
        ins(BPF_JA, 0, 0, 0),                    // foreign: to rest (set below)
        ins(BPF_LD_W_ABS, 0, 0, 0),              // seccomp_data.nr
    ];
    let mut to_rest = vec![2];
    for group in ranges(allowed).chunks(GROUP) {
        let n = group.len();
        for (j, &(lo, hi)) in group.iter().enumerate() {
            // From the instruction after this range's second, the group's `RET ALLOW` is
            // 2(n - j) - 1 ahead and its jump to `rest` one further (at most 2 * GROUP).
            let allow = (2 * (n - j) - 1) as u8;
            out.push(ins(BPF_JGT_K, 1, 0, hi)); // above: the next range
            out.push(ins(BPF_JGE_K, allow, allow + 1, lo)); // within: allowed; below: rest
        }
        out.push(ins(BPF_JA, 0, 0, 2)); // above the group: the next group, or rest
        out.push(ins(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW));
        to_rest.push(out.len());
        out.push(ins(BPF_JA, 0, 0, 0));
    }
    let start = out.len();
    for i in to_rest {
        out[i].k = (start - i - 1) as u32;
    }
    out.extend(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A classic BPF interpreter for the instructions seccompiler and this module emit:
    /// the filter's answer for `data` (a `struct seccomp_data`).
    fn run(prog: &[sock_filter], data: &[u8; 64]) -> u32 {
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = &prog[pc];
            pc += 1;
            let jump = |cond: bool| usize::from(if cond { i.jt } else { i.jf });
            match i.code {
                0x20 => {
                    let k = i.k as usize;
                    a = u32::from_le_bytes(data[k..k + 4].try_into().unwrap());
                }
                0x54 => a &= i.k,
                0x05 => pc += i.k as usize,
                0x15 => pc += jump(a == i.k),
                0x25 => pc += jump(a > i.k),
                0x35 => pc += jump(a >= i.k),
                0x45 => pc += jump(a & i.k != 0),
                0x06 => return i.k,
                code => panic!("instruction {code:#x} at {}", pc - 1),
            }
        }
    }

    fn data(arch: u32, nr: u32, args: [u64; 6]) -> [u8; 64] {
        let mut d = [0u8; 64];
        d[0..4].copy_from_slice(&nr.to_le_bytes());
        d[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            d[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        d
    }

    #[test]
    fn consecutive_numbers_make_one_range() {
        let set = |v: &[u32]| v.iter().copied().collect::<BTreeSet<u32>>();
        assert_eq!(ranges(&set(&[])), []);
        assert_eq!(ranges(&set(&[5])), [(5, 5)]);
        assert_eq!(ranges(&set(&[0, 1, 2, 4, 6, 7])), [(0, 2), (4, 4), (6, 7)]);
        assert_eq!(
            ranges(&set(&[u32::MAX - 1, u32::MAX])),
            [(u32::MAX - 1, u32::MAX)]
        );
    }

    #[test]
    fn every_number_is_allowed_exactly_when_listed_across_many_groups() {
        const REST: u32 = 0x0005_0001;
        let rest = vec![sock_filter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: REST,
        }];
        // 300 ranges (three groups), then one group exactly full, then none.
        let sets: [BTreeSet<u32>; 3] = [
            (0..900).filter(|n| n % 3 != 1).collect(),
            (0..200).map(|n| n * 2).collect(),
            BTreeSet::new(),
        ];
        for allowed in sets {
            let prog = with_allowed_ranges(&allowed, rest.clone());
            for nr in (0..1000).chain([0x4000_0000, u32::MAX]) {
                let want = if allowed.contains(&nr) {
                    SECCOMP_RET_ALLOW
                } else {
                    REST
                };
                assert_eq!(
                    run(&prog, &data(super::super::AUDIT_ARCH, nr, [0; 6])),
                    want,
                    "{nr}"
                );
                assert_eq!(run(&prog, &data(0x4000_0003, nr, [0; 6])), REST, "foreign {nr}");
            }
        }
    }

    #[test]
    fn the_child_filter_answers_every_call_as_seccompiler_alone_does() {
        use super::super::{seccomp, seccomp_args};
        use std::collections::BTreeMap;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for (unix_sockets, ip) in [(false, false), (false, true), (true, true)] {
            // The filter as it was compiled before: seccompiler, every rule.
            let mut all: BTreeMap<i64, Vec<seccompiler::SeccompRule>> = BTreeMap::new();
            for (_, nr) in seccomp::ALLOWED.iter().chain(seccomp::ALLOWED_ARCH) {
                all.insert(*nr, Vec::new());
            }
            let conditional = seccomp_args::rules(unix_sockets, ip).unwrap();
            let conditional_nrs: Vec<u32> = conditional.iter().map(|(nr, _)| *nr as u32).collect();
            all.extend(conditional);
            let whole = seccomp_args::with_clone3_enosys(seccomp::compile(all).unwrap());
            let ranged = seccomp::child_filter(unix_sockets, ip).unwrap();
            assert!(
                ranged.len() * 3 < whole.len(),
                "{} against {}",
                ranged.len(),
                whole.len()
            );
            let nrs = (0..1024u32).chain((0..1024).map(|n| 0x4000_0000 | n)).chain([
                0x7fff_ffff,
                0x8000_0000,
                u32::MAX,
            ]);
            for nr in nrs {
                let conditional = conditional_nrs.contains(&nr);
                let mut argv: Vec<[u64; 6]> = vec![[0; 6], [u64::MAX; 6], [1; 6]];
                let tries = if conditional { 400 } else { 4 };
                for t in 0..tries {
                    let mut a = [0u64; 6];
                    for (i, v) in a.iter_mut().enumerate() {
                        *v = match (t + i) % 4 {
                            0 => t as u64 % 64,
                            1 => random(),
                            2 => random() & 0xffff_ffff,
                            _ => 1u64 << (random() % 64),
                        };
                    }
                    argv.push(a);
                }
                for arch in [super::super::AUDIT_ARCH, 0x4000_0003] {
                    for a in &argv {
                        let d = data(arch, nr, *a);
                        assert_eq!(
                            run(&ranged, &d),
                            run(&whole, &d),
                            "nr {nr:#x} arch {arch:#x} args {a:x?}"
                        );
                    }
                }
            }
        }
    }
}
