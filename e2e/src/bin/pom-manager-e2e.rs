//! The `pom-manager` entry point, built inside the e2e crate so that its tests can run the
//! manager as a process (cargo builds a package's own binaries before its integration tests;
//! see `pom_e2e::manager_process`).

fn main() -> std::process::ExitCode {
    pom_controller::cli::main()
}
