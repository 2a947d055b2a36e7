import CAvahi
import PartyCastCore

/// A service found on the LAN.
public struct DiscoveredService: Sendable, Equatable {
    public var name: String
    public var hostName: String
    public var address: String
    public var port: Int
    public var txt: [String: String]
}

public enum PartyCastService {
    /// The DNS-SD type broadcasters publish.
    public static let type = "_partycast._tcp"
}

/// avahi-client on its own threaded poll loop. Every avahi call sits behind a small method here;
/// callbacks arrive on the poll thread with the loop lock held.
final class AvahiConnection {
    let poll: OpaquePointer
    private(set) var client: OpaquePointer?
    private let onState: (AvahiClientState) -> Void

    /// - Parameter waitForDaemon: keep going (and reconnect) while avahi-daemon is away, instead of failing.
    init(waitForDaemon: Bool, onState: @escaping (AvahiClientState) -> Void) throws(PartyCastError) {
        guard let poll = avahi_threaded_poll_new() else { throw PartyCastError(.io, "avahi: cannot create a poll loop") }
        self.poll = poll
        self.onState = onState
        var error: Int32 = 0
        let flags = waitForDaemon ? AVAHI_CLIENT_NO_FAIL : AvahiClientFlags(rawValue: 0)
        let client = avahi_client_new(avahi_threaded_poll_get(poll), flags, { client, state, context in
            let connection = Unmanaged<AvahiConnection>.fromOpaque(context!).takeUnretainedValue()
            if connection.client == nil { connection.client = client }  // the first callback comes before avahi_client_new returns
            connection.onState(state)
        }, Unmanaged.passUnretained(self).toOpaque(), &error)
        guard let client else {
            avahi_threaded_poll_free(poll)
            throw PartyCastError(.io, Self.unavailableMessage(error))
        }
        self.client = client
    }

    static func unavailableMessage(_ error: Int32) -> String {
        if error == Int32(AVAHI_ERR_NO_DAEMON) || error == Int32(AVAHI_ERR_DISCONNECTED) {
            return "avahi-daemon is not running (\(message(error))): start it, or give the broadcaster's address with --host"
        }
        return "avahi: \(message(error))"
    }

    static func message(_ error: Int32) -> String { String(cString: avahi_strerror(error)) }

    var lastError: String { client.map { Self.message(avahi_client_errno($0)) } ?? "no client" }

    func start() throws(PartyCastError) {
        guard avahi_threaded_poll_start(poll) >= 0 else { throw PartyCastError(.io, "avahi: cannot start its poll thread") }
    }

    /// Runs `body` with the poll loop's lock held (not needed inside callbacks, which hold it).
    func locked<T>(_ body: () -> T) -> T {
        avahi_threaded_poll_lock(poll)
        defer { avahi_threaded_poll_unlock(poll) }
        return body()
    }

    func close() {
        avahi_threaded_poll_stop(poll)
        if let client { avahi_client_free(client) }
        client = nil
        avahi_threaded_poll_free(poll)
    }
}
