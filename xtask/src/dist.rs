//! `cargo xtask dist`: what people download. A release build of `holdpoint` with the site built in (the server's
//! feature `embed-site`), packed twice into `target/dist/`:
//!
//! - `holdpoint-<version>-<target>.tar.gz`: the directory `holdpoint-<version>-<target>/` with `holdpoint`,
//!   `LICENSE`, `README.md`, `holdpoint.toml.example` and `holdpoint.service`;
//! - `holdpoint_<version>-1_<arch>.deb`: `/usr/bin/holdpoint`, the systemd unit, `/etc/holdpoint/holdpoint.toml` (a
//!   conffile) and the scripts that create the `holdpoint` user and enable the service (`packaging/`), built with
//!   `dpkg-deb`, which every Debian and Ubuntu has, so nothing needs compiling for it;
//!
//! and `SHA256SUMS` of both. `cargo xtask test` packs its own debug build the same way ([`package`]) and tests what
//! comes out, without a release build.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, cargo, root, run};

/// The version of the workspace, which the server shares.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The `Maintainer` of the Debian package, which dpkg requires. The project publishes no address; `.invalid` (RFC
/// 2606) says so rather than making one up.
const MAINTAINER: &str = "Holdpoint maintainers <maintainers@holdpoint.invalid>";

/// How hard the archives are compressed: a release is compressed once and downloaded many times; the test's
/// package of a debug binary only has to be unpacked once, right away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    Best,
    Fast,
}

/// What [`package`] wrote.
#[derive(Debug)]
pub struct Packages {
    pub tarball: PathBuf,
    pub deb: PathBuf,
}

/// `cargo xtask dist`.
pub fn dist(args: &[String]) -> Result {
    if !args.is_empty() {
        return Err(format!("`cargo xtask dist` takes no arguments, got {args:?}"));
    }
    let started = std::time::Instant::now();
    let tools = crate::tools::ensure_site_tools()?;
    crate::site::build(&tools)?;
    run(cargo().args([
        "build",
        "--package",
        "holdpoint-server",
        "--bin",
        "holdpoint",
        "--release",
        "--features",
        "embed-site",
    ]))?;
    let packages = package(&root().join("target/release/holdpoint"), &root().join("target/dist"), Compression::Best)?;
    eprintln!(
        "xtask: dist took {:.0} s: {} and {}",
        started.elapsed().as_secs_f64(),
        packages.tarball.display(),
        packages.deb.display()
    );
    Ok(())
}

/// Packs `binary` (built with the site embedded) into `out_dir` (emptied first): the tarball, the Debian package
/// and their checksums.
pub fn package(binary: &Path, out_dir: &Path, compression: Compression) -> Result<Packages> {
    let target = host_target()?;
    let arch = debian_arch(&target)?;
    let staging = root().join("target/tmp/dist-staging");
    for dir in [out_dir, staging.as_path()] {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|e| format!("cannot empty {}: {e}", dir.display()))?;
        }
        create_dir(dir)?;
    }
    let tarball = tarball(binary, &target, &staging, out_dir, compression)?;
    let deb = debian_package(binary, arch, &staging, out_dir, compression)?;
    let names: Vec<&std::ffi::OsStr> = [&tarball, &deb].iter().filter_map(|path| path.file_name()).collect();
    let sums = Command::new("sha256sum")
        .args(&names)
        .current_dir(out_dir)
        .output()
        .map_err(|e| format!("cannot run sha256sum: {e}"))?;
    if !sums.status.success() {
        return Err(format!("sha256sum failed: {}", String::from_utf8_lossy(&sums.stderr)));
    }
    write(&out_dir.join("SHA256SUMS"), &sums.stdout, 0o644)?;
    std::fs::remove_dir_all(&staging).map_err(|e| format!("cannot remove {}: {e}", staging.display()))?;
    Ok(Packages { tarball, deb })
}

/// `holdpoint-<version>-<target>.tar.gz`, whose one directory holds everything needed to run it by hand.
fn tarball(binary: &Path, target: &str, staging: &Path, out_dir: &Path, compression: Compression) -> Result<PathBuf> {
    let name = format!("holdpoint-{VERSION}-{target}");
    let dir = staging.join(&name);
    create_dir(&dir)?;
    let packaging = root().join("packaging");
    copy(binary, &dir.join("holdpoint"), 0o755)?;
    copy(&root().join("LICENSE"), &dir.join("LICENSE"), 0o644)?;
    copy(&root().join("README.md"), &dir.join("README.md"), 0o644)?;
    copy(&packaging.join("holdpoint.toml"), &dir.join("holdpoint.toml.example"), 0o644)?;
    copy(&packaging.join("holdpoint.service"), &dir.join("holdpoint.service"), 0o644)?;
    let tarball = out_dir.join(format!("{name}.tar.gz"));
    let gzip = match compression {
        Compression::Best => "gzip -9",
        Compression::Fast => "gzip -1",
    };
    // Owned by root in the archive, whoever packed it; in name order, so two packings list alike.
    run(Command::new("tar")
        .args(["--create", "--owner=0", "--group=0", "--numeric-owner", "--sort=name", "--use-compress-program"])
        .arg(gzip)
        .arg("--file")
        .arg(&tarball)
        .arg("--directory")
        .arg(staging)
        .arg(&name))?;
    Ok(tarball)
}

/// `holdpoint_<version>-1_<arch>.deb`, laid out as Debian's packages are.
fn debian_package(
    binary: &Path,
    arch: &str,
    staging: &Path,
    out_dir: &Path,
    compression: Compression,
) -> Result<PathBuf> {
    let tree = staging.join("deb");
    let packaging = root().join("packaging");
    let docs = tree.join("usr/share/doc/holdpoint");
    for dir in ["DEBIAN", "usr/bin", "usr/lib/systemd/system", "etc/holdpoint", "usr/share/doc/holdpoint"] {
        create_dir(&tree.join(dir))?;
    }
    copy(binary, &tree.join("usr/bin/holdpoint"), 0o755)?;
    copy(&packaging.join("holdpoint.service"), &tree.join("usr/lib/systemd/system/holdpoint.service"), 0o644)?;
    copy(&packaging.join("holdpoint.toml"), &tree.join("etc/holdpoint/holdpoint.toml"), 0o644)?;
    copy(&root().join("README.md"), &docs.join("README.md"), 0o644)?;
    let license = std::fs::read_to_string(root().join("LICENSE")).map_err(|e| format!("cannot read LICENSE: {e}"))?;
    let copyright = format!(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\nUpstream-Name: holdpoint\n\n\
         Files: *\nCopyright: the Holdpoint authors\nLicense: Apache-2.0\n\nLicense: Apache-2.0\n{}",
        debian_paragraph(&license)
    );
    write(&docs.join("copyright"), copyright.as_bytes(), 0o644)?;
    for script in ["postinst", "prerm", "postrm"] {
        copy(&packaging.join("debian").join(script), &tree.join("DEBIAN").join(script), 0o755)?;
    }
    write(&tree.join("DEBIAN/conffiles"), b"/etc/holdpoint/holdpoint.toml\n", 0o644)?;
    let version = debian_version();
    let control = format!(
        "Package: holdpoint\nVersion: {version}\nArchitecture: {arch}\nMaintainer: {MAINTAINER}\n\
         Installed-Size: {}\nDepends: adduser, libc6\nSection: net\nPriority: optional\n\
         Description: human-in-the-loop control plane for AI agents\n{}",
        installed_kib(&tree)?,
        debian_paragraph(
            "Holdpoint lets AI agents stop and ask a person (free text, a choice, a form, an approval of a risky \
             tool call) and carry on where they stopped. It serves a web UI, a REST API and MCP from one binary, \
             with SQLite or PostgreSQL.\n\nThe service runs as the user holdpoint with its data in \
             /var/lib/holdpoint and its settings in /etc/holdpoint/holdpoint.toml."
        )
    );
    write(&tree.join("DEBIAN/control"), control.as_bytes(), 0o644)?;
    let deb = out_dir.join(format!("holdpoint_{version}_{arch}.deb"));
    let (format, level) = match compression {
        Compression::Best => ("-Zxz", "-z9"),
        Compression::Fast => ("-Zgzip", "-z1"),
    };
    run(Command::new("dpkg-deb").args(["--root-owner-group", format, level, "--build"]).arg(&tree).arg(&deb))?;
    Ok(deb)
}

/// The Debian revision `-1` after the version, whose pre-release part (`0.2.0-rc.1`) takes `~`, which sorts before
/// the release as the pre-release does.
fn debian_version() -> String {
    format!("{}-1", VERSION.replace('-', "~"))
}

/// Text as a Debian control field's continuation lines: each line indented by one space, empty ones as ` .`.
fn debian_paragraph(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            out.push_str(" .\n");
        } else {
            out.push(' ');
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The size of the package's files, in KiB, for `Installed-Size`.
fn installed_kib(dir: &Path) -> Result<u64> {
    let mut bytes = 0;
    for entry in std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))? {
        let entry = entry.map_err(|e| e.to_string())?;
        if entry.file_name() == "DEBIAN" {
            continue;
        }
        let metadata = entry.metadata().map_err(|e| e.to_string())?;
        bytes += if metadata.is_dir() { installed_kib(&entry.path())? * 1024 } else { metadata.len() };
    }
    Ok(bytes.div_ceil(1024))
}

/// The target triple rustc builds for here (`x86_64-unknown-linux-gnu`).
fn host_target() -> Result<String> {
    let output = Command::new("rustc").arg("-vV").output().map_err(|e| format!("cannot run rustc -vV: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find_map(|line| line.strip_prefix("host: "))
        .map(|host| host.trim().to_owned())
        .ok_or_else(|| "rustc -vV names no host target".to_owned())
}

/// Debian's name of the target's architecture.
fn debian_arch(target: &str) -> Result<&'static str> {
    let cpu = target.split('-').next().unwrap_or_default();
    Ok(match cpu {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "i686" | "i586" => "i386",
        "armv7" => "armhf",
        "riscv64gc" => "riscv64",
        "powerpc64le" => "ppc64el",
        "s390x" => "s390x",
        _ => return Err(format!("no Debian architecture is known for the target {target}")),
    })
}

fn create_dir(dir: &Path) -> Result {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("cannot set the mode of {}: {e}", dir.display()))
}

/// Copies a file with the mode it has in the packages, whatever the umask.
fn copy(from: &Path, to: &Path, mode: u32) -> Result {
    std::fs::copy(from, to).map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("cannot set the mode of {}: {e}", to.display()))
}

fn write(path: &Path, contents: &[u8], mode: u32) -> Result {
    std::fs::write(path, contents).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("cannot set the mode of {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_paragraphs_are_indented_with_empty_lines_as_dots() {
        assert_eq!(debian_paragraph("one\n\ntwo"), " one\n .\n two\n");
    }

    #[test]
    fn architectures_are_named_as_debian_names_them() {
        assert_eq!(debian_arch("x86_64-unknown-linux-gnu"), Ok("amd64"));
        assert_eq!(debian_arch("aarch64-unknown-linux-gnu"), Ok("arm64"));
        assert!(debian_arch("wasm32-unknown-unknown").is_err());
    }
}
