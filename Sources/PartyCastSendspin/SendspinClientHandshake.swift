#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How a Sendspin client opens a connection, free of I/O: aiosendspin 10's (the `sendspin serve`
/// CLI's) encrypted opening, whose plain alternative its servers flag as non-compliant ("connected
/// unencrypted"). The client sends `client/init` (its static X25519 key, the suite), reads
/// `server/init` (the server's key) and the server's Noise message 1, and answers message 2 keyed by
/// the published Sentinel PSK: the "unpaired access" a server grants any client, as aiosendspin's
/// client falls back to when it holds no PSK the server names (noise/driver.py).
public struct SendspinClientHandshake: Sendable {
    public enum Step: Sendable {
        /// Send this text frame and wait for the next.
        case reply([UInt8])
        /// Nothing to send yet.
        case wait
        /// Send `reply` (Noise message 2); everything after it goes through `channel`.
        case established(reply: [UInt8], serverID: String, channel: SendspinSecureChannel)
        case fail(String)
    }

    private enum Phase { case awaitingServerInit, awaitingMessage1(NoiseKKResponder, serverID: String), done }

    public static let suite = NoiseSuite.chachaPoly
    /// The first text frame, sent as the WebSocket opens; also the start of the Noise prologue.
    public let clientInit: [UInt8]
    private let clientKey: X25519KeyPair
    private let ephemeral: X25519KeyPair
    private var phase = Phase.awaitingServerInit

    /// `clientKey` is this client's identity (its id is the public key); `ephemeral` fresh per connection.
    public init(clientKey: X25519KeyPair = .init(), ephemeral: X25519KeyPair = .init()) {
        self.clientKey = clientKey
        self.ephemeral = ephemeral
        let id = SendspinHandshake.base64URL(clientKey.publicKey)
        clientInit = Array(#"{"payload":{"client_id":"\#(id)","suite":"\#(Self.suite.rawValue)","version":1},"type":"client/init"}"#.utf8)
    }

    public var clientID: String { SendspinHandshake.base64URL(clientKey.publicKey) }

    private struct ServerInit: Decodable {
        struct Payload: Decodable {
            let serverID: String
            let version: Int
            enum CodingKeys: String, CodingKey { case serverID = "server_id", version }
        }
        let type: String
        let payload: Payload
    }
    private struct Handshake: Decodable {
        struct Payload: Decodable { let data: String }
        let type: String
        let payload: Payload
    }
    private struct Kind: Decodable { let type: String }
    private struct ServerError: Decodable {
        struct Payload: Decodable { let reason: String? }
        let payload: Payload?
    }

    /// One text frame from the server (binary frames before the handshake ends are the caller's to refuse).
    public mutating func receive(text: some Collection<UInt8>) -> Step {
        guard text.count <= SendspinHandshake.maxFrameBytes else { return fail("a handshake frame of \(text.count) bytes") }
        let bytes = Array(text)
        let decoder = JSONDecoder()
        if let kind = try? decoder.decode(Kind.self, from: Data(bytes)), kind.type == "server/error" {
            let reason = (try? decoder.decode(ServerError.self, from: Data(bytes)))?.payload?.reason ?? "no reason"
            return fail("the server refused the connection (\(String(untrustedType: reason)))")
        }
        switch phase {
        case .done:
            return fail("a handshake frame after the handshake")
        case .awaitingServerInit:
            guard let serverInit = try? decoder.decode(ServerInit.self, from: Data(bytes)), serverInit.type == "server/init" else {
                return fail("its first frame is not a server/init")
            }
            guard serverInit.payload.version == 1 else { return fail("it speaks core version \(serverInit.payload.version)") }
            let id = serverInit.payload.serverID
            guard id.utf8.count == 43, let key = SendspinHandshake.fromBase64URL(id), key.count == 32 else {
                return fail("its server_id is not an X25519 key")
            }
            // The prologue binds both cleartext frames, exactly as sent, to the session.
            phase = .awaitingMessage1(NoiseKKResponder(suite: Self.suite, staticKey: clientKey, remoteStatic: key,
                                                       prologue: clientInit + bytes, ephemeral: ephemeral), serverID: id)
            return .wait
        case .awaitingMessage1(var responder, let serverID):
            guard let handshake = try? decoder.decode(Handshake.self, from: Data(bytes)), handshake.type == "noise/handshake",
                  let message1 = SendspinHandshake.fromBase64URL(handshake.payload.data) else {
                return fail("its Noise message 1 is malformed")
            }
            do throws(NoiseError) {
                // Its payload names the server's PSK; this client holds none but the Sentinel.
                _ = try responder.readMessage1(message1)
                let (message2, transport) = try responder.writeMessage2(payload: Array("{}".utf8), psk: SendspinHandshake.sentinelPSK)
                phase = .done
                let reply = Array(#"{"payload":{"data":"\#(SendspinHandshake.base64URL(message2))"},"type":"noise/handshake"}"#.utf8)
                return .established(reply: reply, serverID: serverID, channel: SendspinSecureChannel(transport: transport))
            } catch {
                return fail("Noise message 1: \(error.reason)")
            }
        }
    }

    private mutating func fail(_ reason: String) -> Step {
        phase = .done
        return .fail(reason)
    }
}
