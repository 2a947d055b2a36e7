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
/// What the signal handler wakes `onInterrupt`'s thread through (write(2) is async-signal-safe; a
/// lock or an allocation would not be). Made before the handler is installed, never by it.
private let interruptWake = try? WakePipe()

/// Ctrl-C and SIGTERM ask for a clean stop instead of killing the process; a peer that closes the
/// socket mid-write must not kill it either.
public func installInterruptHandler() {
    _ = interruptWake
    signal(SIGINT) { _ in signalInterrupt() }
    signal(SIGTERM) { _ in signalInterrupt() }
    ignoreBrokenPipes()
}

/// A peer that closes its socket (or a reader its pipe) mid-write is an error to handle, not a reason to die.
public func ignoreBrokenPipes() {
    signal(SIGPIPE, SIG_IGN)
}

private func signalInterrupt() {
    interrupted.store(true, ordering: .relaxed)
    interruptWake?.wake()
}

/// Runs `action` once, on a thread of its own, when Ctrl-C or SIGTERM comes (or at once if one
/// already came): the thread sleeps in read(2) until then, so nothing polls `interrupted`.
/// Call it once, after `installInterruptHandler()`.
public func onInterrupt(_ action: @escaping @Sendable () -> Void) {
    guard let readEnd = interruptWake?.readEnd else { return }
    // Detached: it lives as long as the process, asleep.
    _ = DedicatedThread {
        var byte: UInt8 = 0
        while !interrupted.load(ordering: .relaxed) {
            // Only a closed pipe ends it (the process is exiting); the handler's byte wakes it.
            guard let n = try? systemCall("read", { read(readEnd, &byte, 1) }), n > 0 else { return }
        }
        action()
    }
}
