#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How a Sendspin connection opens, the server's side, free of I/O. The spec's clients send their
/// client/hello first, in the clear. aiosendspin 10's (the `sendspin` CLI's) encrypt everything: a
/// cleartext `client/init` (their static X25519 key, a Noise suite), the server's `server/init` (its
/// key) and two `noise/handshake` messages of `Noise_KKpsk2`, keyed by the published Sentinel PSK
/// when, as here, no pairing made another. That admits a client with "unpaired access" (the CLI's
/// default); then every message is sealed (`SendspinSecureChannel`). The public spec does not have
/// this yet: we follow aiosendspin (github.com/Sendspin/aiosendspin, noise/driver.py).
public struct SendspinHandshake: Sendable {
    public enum Step: Sendable {
        /// A spec client: its first message was this client/hello. Hand it to a `.plain` session.
        case plain
        /// Send these text frames and wait for the next.
        case reply([[UInt8]])
        /// The handshake is through: everything from here goes through `channel`.
        case established(clientID: String, channel: SendspinSecureChannel)
        /// Send `reply` (a server/error), if any, and close.
        case reject(reply: [UInt8]?, reason: String)
    }

    /// SHA-256 of "sendspin-sentinel-psk-v1": public, so it authenticates nothing.
    public static let sentinelPSK = NoiseCrypto.sha256(Array("sendspin-sentinel-psk-v1".utf8))
    public static let maxFrameBytes = 64 * 1024

    private enum Phase { case awaitingInit, awaitingMessage2(NoiseKKInitiator, clientID: String), done }

    private let serverKey: X25519KeyPair
    private let ephemeral: X25519KeyPair
    private var phase = Phase.awaitingInit

    /// `ephemeral` is fresh for every connection; a test may fix it.
    public init(serverKey: X25519KeyPair, ephemeral: X25519KeyPair = .init()) {
        self.serverKey = serverKey
        self.ephemeral = ephemeral
    }

    /// The server's id: its static public key, base64url without padding.
    public var serverID: String { Self.base64URL(serverKey.publicKey) }

    /// One text frame from the client.
    public mutating func receive(text: some Collection<UInt8>) -> Step {
        guard text.count <= Self.maxFrameBytes else { return end("a handshake frame of \(text.count) bytes") }
        switch phase {
        case .done:
            return end("a frame after the handshake ended")
        case .awaitingInit:
            return answer(Array(text))
        case let .awaitingMessage2(initiator, clientID):
            return finish(initiator, clientID: clientID, text: Array(text))
        }
    }

    private struct Kind: Decodable { let type: String }
    private struct ClientInit: Decodable {
        struct Payload: Decodable {
            let clientID: String
            let version: Int
            let suite: String
            enum CodingKeys: String, CodingKey { case clientID = "client_id", version, suite }
        }
        let payload: Payload
    }
    private struct Handshake: Decodable {
        struct Payload: Decodable { let data: String }
        let type: String
        let payload: Payload
    }
    /// Any JSON object.
    private struct Object: Decodable {
        private struct NoKeys: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init?(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
        init(from decoder: Decoder) throws { _ = try decoder.container(keyedBy: NoKeys.self) }
    }

    private mutating func answer(_ text: [UInt8]) -> Step {
        let decoder = JSONDecoder()
        guard let kind = try? decoder.decode(Kind.self, from: Data(text)) else { return reject("malformed", "its first frame is not a JSON message") }
        if kind.type == "client/hello" {
            phase = .done
            return .plain
        }
        guard kind.type == "client/init", let opening = try? decoder.decode(ClientInit.self, from: Data(text)).payload else {
            return reject("malformed", "its first frame is neither client/hello nor client/init")
        }
        guard opening.version == 1 else { return reject("unsupported_version", "it speaks core version \(opening.version)") }
        guard let suite = NoiseSuite(rawValue: opening.suite), NoiseSuite.available.contains(suite) else { return reject("unsupported_suite", "it asked for an unknown Noise suite") }
        guard opening.clientID.utf8.count == 43, let keyBytes = Self.fromBase64URL(opening.clientID), keyBytes.count == 32 else {
            return reject("malformed", "its client_id is not an X25519 key")
        }
        let serverInit = Array(#"{"payload":{"server_id":"\#(serverID)","version":1},"type":"server/init"}"#.utf8)
        var initiator = NoiseKKInitiator(suite: suite, staticKey: serverKey, remoteStatic: keyBytes, prologue: text + serverInit,
                                         psk: Self.sentinelPSK, ephemeral: ephemeral)
        let pskID = Self.base64URL(NoiseCrypto.sha256(Array("sendspin-psk-id-v1".utf8) + Self.sentinelPSK))
        do throws(NoiseError) {
            let message1 = try initiator.writeMessage1(payload: Array(#"{"psk_id":"\#(pskID)","psk_category":"sn"}"#.utf8))
            phase = .awaitingMessage2(initiator, clientID: opening.clientID)
            return .reply([serverInit, Array(#"{"payload":{"data":"\#(Self.base64URL(message1))"},"type":"noise/handshake"}"#.utf8)])
        } catch {
            return end("Noise message 1: \(error.reason)")
        }
    }

    private mutating func finish(_ initiator: NoiseKKInitiator, clientID: String, text: [UInt8]) -> Step {
        var initiator = initiator
        guard let handshake = try? JSONDecoder().decode(Handshake.self, from: Data(text)), handshake.type == "noise/handshake",
              let message2 = Self.fromBase64URL(handshake.payload.data) else {
            return end("its Noise message 2 is malformed")
        }
        do throws(NoiseError) {
            let (payload, transport) = try initiator.readMessage2(message2)
            // aiosendspin's message 2 carries an empty JSON object.
            guard (try? JSONDecoder().decode(Object.self, from: Data(payload))) != nil else { return end("its Noise message 2 payload is not a JSON object") }
            phase = .done
            return .established(clientID: clientID, channel: SendspinSecureChannel(transport: transport))
        } catch {
            return end("Noise message 2: \(error.reason)")
        }
    }

    private mutating func reject(_ code: String, _ reason: String) -> Step {
        phase = .done
        return .reject(reply: Array(#"{"payload":{"reason":"\#(code)"},"type":"server/error"}"#.utf8), reason: reason)
    }

    private mutating func end(_ reason: String) -> Step {
        phase = .done
        return .reject(reply: nil, reason: reason)
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        String(Data(bytes).base64EncodedString().replacing("+", with: "-").replacing("/", with: "_").prefix { $0 != "=" })
    }

    static func fromBase64URL(_ text: String) -> [UInt8]? {
        guard text.utf8.count <= 2 * maxFrameBytes else { return nil }
        let standard = text.replacing("-", with: "+").replacing("_", with: "/")
        return Data(base64Encoded: standard + String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)).map(Array.init)
    }
}
