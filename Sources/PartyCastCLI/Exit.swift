import ArgumentParser
import PartyCastCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The one error path out of a program: one line, "program: error [code]: message", and the exit
/// status fixed for that code (see `PartyCastError.Code.exitStatus` and the README).
public func exitFailing(_ error: PartyCastError, program: String) -> ExitCode {
    Console.line("\(program): \(error)")
    return ExitCode(error.code.exitStatus)
}

/// Set by SIGINT or SIGTERM; each program's control loop turns it into a clean stop.
public let interrupted = Atomic<Bool>(false)

/// Ctrl-C and SIGTERM ask for a clean stop instead of killing the process; a peer that closes the
/// socket mid-write must not kill it either.
public func installInterruptHandler() {
    signal(SIGINT) { _ in interrupted.store(true, ordering: .relaxed) }
    signal(SIGTERM) { _ in interrupted.store(true, ordering: .relaxed) }
    signal(SIGPIPE, SIG_IGN)
}
