import PartyCastControlSeam
import PartyCastCore

/// The party's start waits for its listeners' clocks. On a link that queues (Wi-Fi), a clock's
/// first seconds are its worst: its drift is known to tens of ppm, and a song started on it is
/// out of step until it settles. Just before the start is heard, if a listener joined by then
/// says its clock has not settled, the pacer takes back what it sent and holds the timeline at
/// frame 0, as a pause does, until every listener's clock has settled or `settleWaitSeconds`
/// have passed since the start it was set for. The song then starts from its first sample, a lead
/// (`--buffer`) later, on every listener at once, unfaded (muted until then: a codec's delay
/// carries a few ms of the audio taken back into what the listeners decode next). A listener
/// that says nothing of its clock (an older one, a Sendspin player) is not waited for; on a
/// quiet link every clock settles within a second of joining, so the start is held only for one
/// that joins just before it.
extension Party {
    enum StartGate: Equatable {
        /// Decided `startDecisionLeadNanoseconds` before the start is heard.
        case pending
        /// The start is held, at most until `until`.
        case holding(since: UInt64, until: UInt64)
    }

    /// How long before the start the gate is decided: the Withdraw must reach every listener
    /// before it plays frame 0 (`controlMarginNanoseconds`), and the pacer may wake a batch late.
    static let startDecisionLeadNanoseconds = controlMarginNanoseconds + 2 * batchWindowNanoseconds

    /// Whether the start is held for the clocks now.
    var startIsHeld: Bool {
        if case .holding = state.startGate { true } else { false }
    }

    /// When the pacer is next to look at the gate; nil once the song has started.
    var startGateDue: UInt64? {
        switch state.startGate {
        case nil: nil
        case .pending: state.timeline.origin - min(state.timeline.origin, Self.startDecisionLeadNanoseconds)
        case .holding(_, let until): until
        }
    }

    /// Holds the start, or lets it go, by what the listeners last said of their clocks; true while
    /// it is held.
    func gateStart() -> Bool {
        guard let gate = state.startGate, let due = startGateDue else { return false }
        let time = now()
        switch gate {
        case .pending:
            guard time >= due else { return false }
            let unsettled = unsettledListeners
            guard !unsettled.isEmpty, options.settleWaitSeconds > 0 else {
                state.startGate = nil
                return false
            }
            // A minute at most, whatever an embedder asks (`BroadcastOptions.withinRanges`).
            let until = state.timeline.origin &+ UInt64(options.settleWaitSeconds * 1e9)
            takeBack(from: 0)
            silenceEveryone(from: 0)
            // Where the song cannot be opened again, `replace` has moved on to the next that can.
            do throws(PartyCommandError) { try reopenHeldPackets() } catch { logger.warning("holding the start: \(error.message)") }
            state.startGate = .holding(since: time, until: until)
            startHeld.store(true, ordering: .releasing)
            publishState()
            logger.info("holding the start until the clocks of \(Self.named(unsettled)) settle (at most \(options.settleWaitSeconds) s)")
            return true
        case .holding:
            let unsettled = unsettledListeners
            guard unsettled.isEmpty || time >= due else { return true }
            startHeldSong(because: unsettled.isEmpty ? "every listener's clock has settled" : "\(Self.named(unsettled)) still settling")
            return false
        }
    }

    /// Ends the hold: the song starts a lead from now, from where the hold took it back.
    func startHeldSong(because reason: String) {
        guard case .holding(let since, _) = state.startGate else { return }
        state.startGate = nil
        startHeld.store(false, ordering: .releasing)
        let time = now()
        let startAt = max(state.timeline.end, state.timeline.position(at: time + leadNanoseconds))
        putBack(at: startAt)
        restoreEveryone(at: startAt)
        publishState()
        logger.info("starting after a hold of \(String(format: "%.1f", Double(time &- since) / 1e9)) s: \(reason)")
    }

    /// The listeners that last said their clock has not settled.
    private var unsettledListeners: [String] {
        fanout.peers.filter { $0.clockSettled == false }.map(\.name)
    }

    /// Up to three listeners by name, and how many more.
    private static func named(_ names: [String]) -> String {
        let shown = names.prefix(3).joined(separator: ", ")
        return names.count > 3 ? "\(shown) and \(names.count - 3) more" : shown
    }
}
