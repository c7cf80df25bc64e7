//! Parameter files (`cuzk::srs`): what bellperson writes loads; truncated, padded, empty and
//! corrupt files, a missing file, and a `.vk` file that does not match its `.params` file are
//! typed errors naming the files. Small synthetic files (`cuzk_dev::fixture::write_fake_params`).

use std::fs::File;
use std::path::{Path, PathBuf};

use bellperson::groth16::{Parameters, VerifyingKey};
use blstrs::Bls12;
use cuzk::srs::{read_vk_file, Srs};
use cuzk::Error;
use cuzk_dev::fixture::write_fake_params;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cuzk-srs-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join("p.params")
}

#[test]
fn loads_what_bellperson_writes() {
    let path = tmp("ok");
    write_fake_params(&path, 2, [3, 4, 5, 6, 7]).unwrap();
    let srs = Srs::load(&path).unwrap();
    let reference = Parameters::<Bls12>::read(File::open(&path).unwrap(), false).unwrap();
    assert_eq!(srs.vk, reference.vk);
    assert_eq!(*srs.h, *reference.h);
    assert_eq!(*srs.l, *reference.l);
    assert_eq!(*srs.a, *reference.a);
    assert_eq!(*srs.b_g1, *reference.b_g1);
    assert_eq!(*srs.b_g2, *reference.b_g2);
    assert_eq!(srs.size_bytes(), (18 * 96 + 7 * 192) as u64);
}

#[test]
fn bad_files_are_typed_errors() {
    let path = tmp("bad");
    write_fake_params(&path, 2, [3, 4, 5, 6, 7]).unwrap();
    let full = std::fs::read(&path).unwrap();
    // truncated by one byte
    std::fs::write(&path, &full[..full.len() - 1]).unwrap();
    let e = Srs::load(&path).unwrap_err();
    assert_eq!(e.code(), 201, "{e}");
    assert!(e.to_string().contains("truncated in section B_G2"), "{e}");
    // trailing byte
    let mut longer = full.clone();
    longer.push(0);
    std::fs::write(&path, &longer).unwrap();
    assert!(Srs::load(&path)
        .unwrap_err()
        .to_string()
        .contains("1 trailing bytes"));
    // zero length
    std::fs::write(&path, b"").unwrap();
    assert!(Srs::load(&path).unwrap_err().to_string().contains("empty"));
    // a corrupted point
    let mut bad = full.clone();
    let last = bad.len() - 10;
    bad[last] ^= 0xff;
    std::fs::write(&path, &bad).unwrap();
    assert!(Srs::load(&path)
        .unwrap_err()
        .to_string()
        .contains("not on the curve"));
    // missing
    let e = Srs::load(&path.with_extension("nope")).unwrap_err();
    assert_eq!(e.code(), 200);
}

/// Writes `p.params` (2 IC points) and the `.vk` of a file with `vk_ic` IC points.
fn params_and_vk(name: &str, vk_ic: usize) -> (PathBuf, PathBuf) {
    let params = tmp(name);
    write_fake_params(&params, 2, [3, 4, 5, 6, 7]).unwrap();
    let other = params.with_file_name("other.params");
    write_fake_params(&other, vk_ic, [1, 1, 1, 1, 1]).unwrap();
    let vk_path = params.with_extension("vk");
    write_vk_of(&other, &vk_path);
    (params, vk_path)
}

/// Writes the verifying key at the head of the `.params` file `params` to the `.vk` file `to`.
fn write_vk_of(params: &Path, to: &Path) {
    let vk = VerifyingKey::<Bls12>::read(File::open(params).unwrap()).unwrap();
    let mut bytes = Vec::new();
    vk.write(&mut bytes).unwrap();
    std::fs::write(to, bytes).unwrap();
}

#[test]
fn vk_file_must_match_the_parameters() {
    let (params, vk) = params_and_vk("vk-ok", 2);
    let srs = Srs::load_with_vk(&params, &vk).unwrap();
    assert_eq!(srs.vk, read_vk_file(&vk).unwrap());

    let (params, vk) = params_and_vk("vk-bad", 3);
    let e = Srs::load_with_vk(&params, &vk).unwrap_err();
    assert_eq!(e.code(), 201, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&params.display().to_string()) && msg.contains(&vk.display().to_string()),
        "{msg}"
    );

    std::fs::remove_file(&vk).unwrap();
    let e = Srs::load_with_vk(&params, &vk).unwrap_err();
    assert!(
        matches!(e, Error::ParametersNotFound { ref path, .. } if *path == vk),
        "{e}"
    );
    std::fs::write(&vk, b"short").unwrap();
    let e = Srs::load_with_vk(&params, &vk).unwrap_err();
    assert_eq!(e.code(), 201, "{e}");
    assert!(e.to_string().contains(&vk.display().to_string()), "{e}");
}

/// A file whose H and B_G2 sections span several decoding windows (64 MiB): every point equals
/// bellperson's reading, and a bad point in a later window (off the curve; the identity) is
/// still found and named.
#[test]
fn multi_window_sections_load_exactly() {
    use cuzk_dev::fixture::write_tiled_fake_params;
    let path = tmp("windows");
    // H: 1.5 M G1 points = 144 MB (3 windows); B_G2: 0.4 M G2 points = 77 MB (2 windows).
    write_tiled_fake_params(&path, [1_500_000, 1000, 1001, 1002, 400_000]).unwrap();
    let srs = Srs::load(&path).unwrap();
    let reference = Parameters::<Bls12>::read(File::open(&path).unwrap(), false).unwrap();
    assert_eq!(srs.h.len(), 1_500_000);
    assert_eq!(*srs.h, *reference.h);
    assert_eq!(*srs.l, *reference.l);
    assert_eq!(*srs.a, *reference.a);
    assert_eq!(*srs.b_g1, *reference.b_g1);
    assert_eq!(srs.b_g2.len(), 400_000);
    assert_eq!(*srs.b_g2, *reference.b_g2);
    drop((srs, reference));

    let full = std::fs::read(&path).unwrap();
    // vk: 3 G1 + 3 G2 + u32 + 2 IC points; then H's u32.
    let h_start = 3 * 96 + 3 * 192 + 4 + 2 * 96 + 4;
    // Point 1,000,000 of H (the second window) moved off the curve.
    let mut bad = full.clone();
    bad[h_start + 1_000_000 * 96 + 50] ^= 0x01;
    std::fs::write(&path, &bad).unwrap();
    let e = Srs::load(&path).unwrap_err();
    assert_eq!(e.code(), 201, "{e}");
    assert!(
        e.to_string().contains("a G1 point is not on the curve"),
        "{e}"
    );
    // The last B_G2 point replaced by the encoding of the identity.
    let mut inf = full;
    let last = inf.len() - 192;
    inf[last..].fill(0);
    inf[last] = 0x40;
    std::fs::write(&path, &inf).unwrap();
    let e = Srs::load(&path).unwrap_err();
    assert!(
        e.to_string()
            .contains("a G2 point is the point at infinity"),
        "{e}"
    );
    let _ = std::fs::remove_file(&path);
}

/// A file truncated while it is being loaded (after its H section is decoded, before the reader
/// reaches the end of L) is a typed error (201) naming the early end, not a crash: the loader
/// reads the file, it does not map it (a mapped page past a new end is a `SIGBUS`).
#[test]
fn a_file_truncated_during_the_load_is_an_error_not_a_crash() {
    use cuzk_dev::fixture::write_tiled_fake_params;
    let path = tmp("shrinks");
    // L: 5 M G1 points = 480 MB, more than the reader holds ahead of the decoders (6 windows of
    // 64 MiB), so at least its last window is read after the truncation.
    write_tiled_fake_params(&path, [1000, 5_000_000, 1001, 1002, 1003]).unwrap();
    let vk_path = path.with_extension("vk");
    write_vk_of(&path, &vk_path);
    // vk: 3 G1 + 3 G2 + u32 + 2 IC points; then H (u32 + 1000 points) and L's u32.
    let l_start = 3 * 96 + 3 * 192 + 4 + 2 * 96 + 4 + 1000 * 96 + 4;
    let new_len = (l_start + 100 * 96) as u64;
    let mut sections = 0;
    let e = Srs::load_with_vk_then(&path, &vk_path, &mut |_| {
        sections += 1;
        if sections == 1 {
            File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(new_len)
                .unwrap();
        }
    })
    .unwrap_err();
    assert_eq!(sections, 1, "only H was handed out");
    assert_eq!(e.code(), 201, "{e}");
    assert!(e.to_string().contains("truncated during the load"), "{e}");
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&vk_path);
}

/// A point whose compression (0x80) or sort (0x20) flag is set is not an uncompressed point:
/// error 201 naming it (blst would read a 0x80 point as compressed, rebuilding y from x).
#[test]
fn points_with_compression_or_sort_flags_are_refused() {
    let path = tmp("flags");
    write_fake_params(&path, 2, [3, 4, 5, 6, 7]).unwrap();
    let full = std::fs::read(&path).unwrap();
    // vk: 3 G1 + 3 G2 + u32 + 2 IC points; then H's u32.
    let h_start = 3 * 96 + 3 * 192 + 4 + 2 * 96 + 4;
    for (at, flag, want) in [
        (
            h_start + 96,
            0x80,
            "a G1 point has its compression or sort flag set",
        ),
        (
            h_start + 2 * 96,
            0x20,
            "a G1 point has its compression or sort flag set",
        ),
        (
            full.len() - 192,
            0x80,
            "a G2 point has its compression or sort flag set",
        ),
    ] {
        let mut bad = full.clone();
        bad[at] |= flag;
        std::fs::write(&path, &bad).unwrap();
        let e = Srs::load(&path).unwrap_err();
        assert_eq!(e.code(), 201, "{e}");
        assert!(e.to_string().contains(want), "{e}");
    }
    let _ = std::fs::remove_file(&path);
}

/// A `.params` or `.vk` path that is not a regular file (a directory, a FIFO — whose open
/// would wait for a writer —, a device) and a `.vk` file too large to be a verifying key are
/// error 201 at once.
#[test]
fn files_that_are_not_regular_or_too_large_are_refused() {
    let (params, vk) = params_and_vk("irregular", 2);
    let dir = params.parent().unwrap();
    let fifo = dir.join("fifo.params");
    let _ = std::fs::remove_file(&fifo);
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    for odd in [dir.to_path_buf(), fifo.clone(), PathBuf::from("/dev/zero")] {
        let e = Srs::load(&odd).unwrap_err();
        assert_eq!(e.code(), 201, "{e}");
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = Srs::load_with_vk(&params, &odd).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
    // A sparse 17 MiB .vk file.
    File::options()
        .write(true)
        .open(&vk)
        .unwrap()
        .set_len(17 << 20)
        .unwrap();
    let e = Srs::load_with_vk(&params, &vk).unwrap_err();
    assert_eq!(e.code(), 201, "{e}");
    assert!(e.to_string().contains("not a verifying key"), "{e}");
    let _ = std::fs::remove_file(&fifo);
}
