import Logging
import PartyCastBroadcast
import PartyCastCLI
import PartyCastCore
import ServiceLifecycle

/// The pacer as a service of the process: the party runs on a thread of its own (it sleeps to the
/// microsecond, which the cooperative pool must not) until its queue ends, `q`, or the group's
/// graceful shutdown (Ctrl-C, SIGTERM); then it says goodbye to every listener. Its end ends the group.
struct PacerService: Service {
    let party: Party
    let fanout: Fanout
    let logger: Logger

    func run() async throws {
        let (party, fanout, logger) = (self.party, self.fanout, self.logger)
        let outcome: Result<Bool, PartyCastError> = await withGracefulShutdownHandler {
            await withCheckedContinuation { continuation in
                _ = DedicatedThread {
                    let outcome = Result { () throws(PartyCastError) in try party.run() }
                    // Said on this thread too: the goodbye waits (at most `Party.goodbyeDeadline`) for each listener's flush.
                    switch outcome {
                    case .success(let finished): party.sayGoodbye(finished ? "the broadcast is over" : "the broadcaster was stopped")
                    case .failure(let error): party.sayGoodbye("the broadcaster failed: \(error.message)")
                    }
                    continuation.resume(returning: outcome)
                }
            }
        } onGracefulShutdown: {
            party.stop()
        }
        let finished = try outcome.get()
        logger.info(finished ? "the broadcast is over; \(fanout.everJoined) listener(s) joined" : "stopped; said goodbye to every listener")
    }
}

/// Something the process holds until its graceful shutdown, then lets go of: the mDNS
/// advertisement, the terminal's keys.
struct HeldUntilShutdown: Service {
    let release: @Sendable () -> Void

    func run() async throws {
        do { try await gracefulShutdown() } catch { /* cancelled: let go all the same */ }
        release()
    }
}

/// The lines that say the party is up, said once the group runs: by then Ctrl-C and SIGTERM are the
/// group's (it traps them before it starts a service), so whoever waits for them (a script, a test)
/// may signal and get a graceful stop, never the default death of a process still setting up.
/// `drawing` (the remote's QR code, on a terminal) follows the lines, as it is, with no log prefix.
struct Announcement: Service {
    let lines: [String]
    let drawing: [String]
    let logger: Logger

    func run() async throws {
        for line in lines { logger.info("\(line)") }
        for line in drawing { Console.line(line) }
    }
}
