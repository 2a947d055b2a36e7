#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import PartyCastClock
import PartyCastCore
import PartyCastWire

/// The listener's side of one connection up to and around the stream, free of I/O: the Hello it
/// opens with, the key handshake, and the rule that nothing from the broadcaster counts before its
/// Welcome. Runs on the connection's event loop; what it lets through goes to the `StreamReceiver`.
struct ConnectionGate {
    enum Verdict: Equatable {
        /// Write this to the broadcaster.
        case reply(PCEnvelope)
        /// The key handshake is through: seal every byte written after the reply before this, and
        /// open every byte read after the message that caused it.
        case startSealing(KeySession)
        /// Hand this to the stream receiver (the Welcome first, then stream messages).
        case deliver(PCEnvelope)
        /// A clock exchange completed.
        case clock(ClockSample)
        /// End this connection (the broadcaster broke the protocol, or said goodbye); the listener
        /// goes on as for any lost broadcaster.
        case close(String)
        /// Stop listening altogether: retrying can't help (another protocol version, the key).
        case fail(PartyCastError)
    }

    private enum Phase {
        case awaitingWelcome(challenged: Bool)
        case joined
        case ended
    }

    let hello: PCEnvelope
    /// A private party's CPace run, begun in the Hello.
    private let handshake: KeyHandshake.Initiator?
    private var phase = Phase.awaitingWelcome(challenged: false)
    /// Signs this connection's clock datagrams at a private party, from its handshake.
    private(set) var clockKey: ClockDatagramKey?

    init(listenerName: String, hostName: String, listenerID: String, wantsSync: Bool, key: PartyKey?) {
        let handshake = key.map { KeyHandshake.Initiator(key: $0) }
        self.handshake = handshake
        var hello = PCHello()
        hello.protocolVersion = partyCastProtocolVersion
        hello.listenerName = listenerName
        hello.hostName = hostName
        hello.listenerID = listenerID
        hello.wantsSync = wantsSync
        hello.holdsKey = handshake != nil
        if let handshake {
            hello.keySessionID = Data(handshake.sessionID)
            hello.listenerShare = Data(handshake.share)
        }
        var envelope = PCEnvelope()
        envelope.body = .hello(hello)
        self.hello = envelope
    }

    var isJoined: Bool { if case .joined = phase { true } else { false } }
    var wantsSync: Bool { if case .hello(let hello)? = hello.body { hello.wantsSync } else { false } }

    /// What to do with one envelope that arrived at `arrivedAt` (local clock).
    mutating func handle(_ envelope: PCEnvelope, arrivedAt: Int64) -> [Verdict] {
        guard let body = envelope.body else { return [] }  // a newer peer's message: skipped
        switch (phase, body) {
        case (.ended, _):
            return []
        case (_, .error(let error)):
            phase = .ended
            return [refusal(error)]
        case (.awaitingWelcome(let challenged), .keyChallenge(let challenge)):
            return answer(challenge, alreadyChallenged: challenged)
        case (.awaitingWelcome(let challenged), .welcome(let welcome)):
            if let mismatch = protocolMismatch(peerVersion: welcome.protocolVersion, peerRole: "broadcaster") {
                phase = .ended
                return [.fail(PartyCastError(.incompatible, String(untrusted: mismatch.error.message)))]
            }
            if handshake != nil && !challenged {
                phase = .ended
                let name = String(untrusted: welcome.broadcasterName, limit: 60)
                return [.reply(PCEnvelope.failure(.keyRejected, "this broadcaster did not prove it holds the party key (the listener wants a private party)")),
                        .fail(PartyCastError(.key, "\"\(name)\" did not prove it holds your party key, so it is not your party (a public one, or an impostor); refusing it"))]
            }
            phase = .joined
            return [.deliver(envelope)]
        case (.awaitingWelcome, .clockResponse):
            return []  // no request was sent yet: nothing to learn from it
        case (.awaitingWelcome, _):
            phase = .ended
            return [.close("it sent \(Self.describe(body)) before its Welcome")]
        case (.joined, .clockResponse(let response)):
            return [.clock(ClockSample(t1: response.t1, t2: response.t2, t3: response.t3, t4: arrivedAt))]
        case (.joined, .goodbye):
            phase = .ended
            return [.deliver(envelope), .close("it said goodbye")]
        case (.joined, .streamFormat), (.joined, .metadata), (.joined, .audioChunk), (.joined, .endOfStream),
             (.joined, .withdraw), (.joined, .gain), (.joined, .partyState), (.joined, .listenerSettings),
             (.joined, .identify):
            return [.deliver(envelope)]
        case (.joined, _):
            phase = .ended
            return [.close("it sent \(Self.describe(body)) after its Welcome")]
        }
    }

    private mutating func answer(_ challenge: PCKeyChallenge, alreadyChallenged: Bool) -> [Verdict] {
        guard !alreadyChallenged else {
            phase = .ended
            return [.close("it sent a second key challenge")]
        }
        guard let handshake else {
            phase = .ended
            return [.fail(PartyCastError(.key, "this party is private: join it with --key (or PARTYCAST_KEY)"))]
        }
        guard let (confirmation, session) = handshake.finish(broadcasterShare: [UInt8](challenge.broadcasterShare),
                                                            broadcasterConfirmation: [UInt8](challenge.broadcasterConfirmation)) else {
            phase = .ended
            return [.reply(PCEnvelope.failure(.keyRejected, "the party keys differ")),
                    .fail(PartyCastError(.key, "the broadcaster could not prove it holds your party key: the keys differ (or someone replayed an old handshake)"))]
        }
        phase = .awaitingWelcome(challenged: true)
        clockKey = session.clockKey
        var proof = PCKeyProof()
        proof.listenerConfirmation = Data(confirmation)
        var envelope = PCEnvelope()
        envelope.body = .keyProof(proof)
        return [.reply(envelope), .startSealing(session)]
    }

    /// The broadcaster's Error: about the key or the protocol version, final; anything else ends
    /// this connection only.
    private func refusal(_ error: PCError) -> Verdict {
        let message = String(untrusted: error.message)
        switch error.code {
        case .keyRequired:
            return .fail(PartyCastError(.key, "this party is private: join it with --key (or PARTYCAST_KEY)"))
        case .keyRejected:
            return .fail(PartyCastError(.key, "the broadcaster refused your party key: the keys differ (\(message))"))
        case .protocolVersionMismatch:
            return .fail(PartyCastError(.incompatible, message))
        default:
            return .close("it reported an error: \(message)")
        }
    }

    static func describe(_ body: PCEnvelope.OneOf_Body) -> String {
        switch body {
        case .hello: "a Hello"
        case .welcome: "a second Welcome"
        case .streamFormat: "a stream format"
        case .audioChunk: "audio"
        case .metadata: "metadata"
        case .endOfStream: "an end of stream"
        case .goodbye: "a goodbye"
        case .error: "an error"
        case .clockRequest: "a clock request"
        case .clockResponse: "a clock answer"
        case .status: "a status report"
        case .keyChallenge: "a key challenge"
        case .keyProof: "a key proof"
        case .withdraw: "a withdraw"
        case .gain: "a gain"
        case .partyState: "a party state"
        case .listenerSettings: "listener settings"
        case .identify: "an identify"
        }
    }
}
