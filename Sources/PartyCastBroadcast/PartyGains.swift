/// The Gain messages that carry `GainPolicy` to the listeners: fades around a cut, volume ramps, and
/// the greeting a joining listener gets.
extension Party {
    var fadeFrames: Int { GainPolicy.fadeFrames(sampleRate: state.timeline.sampleRate) }

    var everyone: Set<String> { Set(fanout.peers.map(\.listenerID)) }

    private func sendGain(_ value: Float, at position: UInt64, ramp: Int, to id: String) {
        let start = state.gains.claimStart(position, for: id)
        fanout.sendGain(frame(Messages.gain(value, at: start, rampFrames: ramp)), value: value, at: start, rampFrames: ramp, toListener: id)
    }

    /// Everyone fades to `value`, reaching it at `position`.
    func fadeEveryone(to value: Float, endingAt position: UInt64) {
        let fade = fadeFrames
        for id in everyone { sendGain(value, at: position - min(position, UInt64(fade)), ramp: fade, to: id) }
        updateGreeting()
    }

    /// Everyone fades in to its own gain from `position`.
    func fadeEveryoneIn(at position: UInt64) {
        for id in everyone { sendGain(state.gains.gain(of: id), at: position, ramp: fadeFrames, to: id) }
        updateGreeting()
    }

    /// Everyone silent from `position` on, at once: the start held (StartGate.swift) at a frame
    /// nothing has been heard from yet, so that what a codec's delay carries over from the audio
    /// taken back (Opus: 6.5 ms of it, just before the song) is not heard.
    func silenceEveryone(from position: UInt64) {
        for id in everyone { sendGain(0, at: position, ramp: 0, to: id) }
        updateGreeting()
    }

    /// Everyone at its own gain from `position` on, at once: the song's first sample whole.
    func restoreEveryone(at position: UInt64) {
        for id in everyone { sendGain(state.gains.gain(of: id), at: position, ramp: 0, to: id) }
        updateGreeting()
    }

    /// A volume change, heard after the control margin (paused: when the party resumes).
    func ramp(_ id: String) {
        updateGreeting()
        guard !state.timeline.paused else { return }
        sendGain(state.gains.gain(of: id), at: state.timeline.position(at: now() + Self.controlMarginNanoseconds),
                 ramp: GainPolicy.volumeRampFrames(sampleRate: state.timeline.sampleRate), to: id)
    }

    /// What a listener joining now is told first: paused or not, and its gain.
    func updateGreeting() {
        guard let partyState = frame(Messages.partyState(paused: state.timeline.paused)) else { return }
        fanout.setGreeting(partyState: partyState, state.gains.greeting(paused: state.timeline.paused))
    }
}
