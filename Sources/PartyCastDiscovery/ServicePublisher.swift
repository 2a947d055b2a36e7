import CAvahi
import PartyCastCore
import Synchronization

public enum PublisherEvent: Sendable, Equatable, CustomStringConvertible {
    /// The service is on the LAN under this name.
    case established(String)
    /// Another service had the name; this one now goes by the new name.
    case renamed(String)
    /// avahi-daemon is not running (or went away): reported once per outage; publishing resumes
    /// by itself when the daemon is back.
    case daemonUnavailable(String)
    /// avahi refused the service (a bad name, say); nothing more will happen until a restart.
    case failed(String)

    public var description: String {
        switch self {
        case .established(let name): "published as \"\(name)\""
        case .renamed(let name): "name taken on the LAN; renamed to \"\(name)\""
        case .daemonUnavailable(let why): "warning: \(why); still serving by address, will publish when avahi-daemon is back"
        case .failed(let why): "publishing failed: \(why)"
        }
    }
}

/// Publishes `_partycast._tcp` (or another `type`, Sendspin's) on IPv4 with TXT records for as long
/// as it lives. avahi-daemon being absent, stopping or restarting is not an error: one
/// `.daemonUnavailable` warning, then the service is published again when the daemon is back.
///
/// `onEvent` runs on avahi's thread. It may read `publishedName` and call `update(txt:)`, but must
/// not call `stop()` (which joins that thread).
public final class ServicePublisher: @unchecked Sendable {
    // @unchecked: the avahi objects and vars below are touched before avahi's thread starts, on it, under its lock (`loop.locked`), or after it stops.
    private let loop: AvahiLoop
    private let port: UInt16
    private let type: String
    private let onEvent: @Sendable (PublisherEvent) -> Void
    private let currentName: LockedValueBox<String>
    private var txt: [String: String]
    private var client: OpaquePointer?
    private var group: OpaquePointer?
    private var reconnectTimer: OpaquePointer?
    private var warned = false
    private var stopped = false

    /// Throws only for arguments avahi would refuse, or when no avahi loop can be made at all;
    /// a missing daemon is reported through `onEvent` instead.
    public init(name: String, type: String = PartyCastService.type, port: Int, txt: [String: String],
                onEvent: @escaping @Sendable (PublisherEvent) -> Void) throws(PartyCastError) {
        guard (1...65535).contains(port) else { throw PartyCastError(.invalidArgument, "mDNS: \(port) is not a TCP port") }
        guard (1...63).contains(name.utf8.count) else {
            throw PartyCastError(.invalidArgument, "mDNS: a service name is 1 to 63 bytes long; \"\(name)\" is \(name.utf8.count)")
        }
        try Avahi.validate(txt: txt)
        self.port = UInt16(port)
        self.type = type
        self.txt = txt
        self.onEvent = onEvent
        self.currentName = LockedValueBox(name)
        loop = try AvahiLoop()
        reconnectTimer = try Avahi.newTimeout(loop.api, milliseconds: nil, { _, context in
            ServicePublisher.from(context).connect()
        }, Unmanaged.passUnretained(self).toOpaque())
        try loop.start()
        // Connecting happens on avahi's thread too, so every event comes from there.
        loop.locked { scheduleReconnect(afterMilliseconds: 0) }
    }

    private static func from(_ context: UnsafeMutableRawPointer?) -> ServicePublisher {
        Unmanaged<ServicePublisher>.fromOpaque(context!).takeUnretainedValue()
    }

    /// The name the service goes by now (after any renaming).
    public var publishedName: String { currentName.withLockedValue { $0 } }

    // MARK: The connection to avahi-daemon

    /// (Re)creates the client, replacing a failed one; a client that cannot even be created (no
    /// system D-Bus) is retried every second.
    private func connect() {
        guard !stopped else { return }
        if let old = client {
            group = nil  // freed along with its client
            client = nil
            Avahi.freeClient(old)
        }
        var code: Int32 = 0
        do {
            let created = try Avahi.newClient(loop.api, waitForDaemon: true, { client, state, context in
                ServicePublisher.from(context).clientChanged(client!, state)
            }, Unmanaged.passUnretained(self).toOpaque(), code: &code)
            if client == nil { client = created }
        } catch {
            client = nil  // avahi_client_new freed whatever it had begun, groups included
            group = nil
            unavailable("avahi-daemon is not running (cannot reach it over the system D-Bus: \(Avahi.text(code)))")
            scheduleReconnect(afterMilliseconds: 1000)
        }
    }

    private func scheduleReconnect(afterMilliseconds delay: Int) {
        if let reconnectTimer { Avahi.arm(loop.api, reconnectTimer, milliseconds: delay) }
    }

    private func clientChanged(_ changed: OpaquePointer, _ state: AvahiClientState) {
        // The first call comes from inside avahi_client_new, before it has returned the client.
        if client == nil { client = changed }
        guard changed == client, !stopped else { return }
        switch state {
        case AVAHI_CLIENT_S_RUNNING:
            warned = false
            publish()
        case AVAHI_CLIENT_S_COLLISION, AVAHI_CLIENT_S_REGISTERING:
            // The daemon is (re)claiming its host name; our records wait until it is running again.
            if let group, !Avahi.isEmpty(group) { report { () throws(PartyCastError) in try Avahi.reset(group) } }
        case AVAHI_CLIENT_CONNECTING:
            unavailable("avahi-daemon is not running")
        case AVAHI_CLIENT_FAILURE:
            // The daemon (or D-Bus) went away. The client is dead: replace it, out of this callback.
            group = nil
            unavailable("avahi-daemon is not running (it went away: \(Avahi.text(Avahi.clientErrno(changed))))")
            scheduleReconnect(afterMilliseconds: 0)
        default:
            break
        }
    }

    /// One warning per outage.
    private func unavailable(_ why: String) {
        guard !warned else { return }
        warned = true
        onEvent(.daemonUnavailable(why))
    }

    private func report(_ body: () throws(PartyCastError) -> Void) {
        do { try body() } catch { onEvent(.failed(error.message)) }
    }

    // MARK: The entry group holding the service

    private func publish() {
        guard let client, !stopped else { return }
        report { () throws(PartyCastError) in
            if group == nil {
                group = try Avahi.newEntryGroup(client, { group, state, context in
                    ServicePublisher.from(context).groupChanged(group, state)
                }, Unmanaged.passUnretained(self).toOpaque())
            }
            guard let group, Avahi.isEmpty(group) else { return }
            var name = publishedName
            // A service of that name on this very daemon: rename until free (bounded, in case).
            for _ in 0..<100 {
                if try Avahi.addService(group, name: name, type: type, port: port, txt: txt) { break }
                name = rename()
            }
            try Avahi.commit(group)
        }
    }

    private func groupChanged(_ changed: OpaquePointer?, _ state: AvahiEntryGroupState) {
        guard !stopped, group == nil || changed == group else { return }
        switch state {
        case AVAHI_ENTRY_GROUP_ESTABLISHED:
            onEvent(.established(publishedName))
        case AVAHI_ENTRY_GROUP_COLLISION:
            // Another host on the LAN has the name.
            _ = rename()
            if let group { report { () throws(PartyCastError) in try Avahi.reset(group) } }
            publish()
        case AVAHI_ENTRY_GROUP_FAILURE:
            let code = client.map(Avahi.clientErrno) ?? Int32(AVAHI_ERR_FAILURE)
            onEvent(.failed(Avahi.error("cannot publish \"\(publishedName)\"", code).message))
        default:
            break
        }
    }

    /// "Name" → "Name #2" → "Name #3"…
    private func rename() -> String {
        let next = Avahi.alternativeName(publishedName)
        currentName.withLockedValue { $0 = next }
        onEvent(.renamed(next))
        return next
    }

    /// Replaces the TXT records (a listener count, say) without withdrawing the service.
    public func update(txt: [String: String]) {
        do {
            try Avahi.validate(txt: txt)
        } catch {
            return onEvent(.failed(error.message))
        }
        loop.locked {
            guard txt != self.txt, !stopped else { return }
            self.txt = txt
            // Not published right now: the new records go out with the next publish.
            guard let group, !Avahi.isEmpty(group) else { return }
            report { () throws(PartyCastError) in
                try Avahi.updateTXT(group, name: publishedName, type: type, txt: txt)
            }
        }
    }

    /// Withdraws the service and stops avahi's thread. Not from inside `onEvent`.
    public func stop() {
        let already = loop.locked { () -> Bool in
            defer { stopped = true }
            return stopped
        }
        guard !already else { return }
        loop.stop()
        // avahi's thread is gone: nothing else touches these now.
        if let group { Avahi.freeEntryGroup(group) }
        group = nil
        if let client { Avahi.freeClient(client) }
        client = nil
    }

    deinit { stop() }
}
