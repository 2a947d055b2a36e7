import CAvahi
import PartyCastCore
import Synchronization

public enum PublisherEvent: Sendable, Equatable, CustomStringConvertible {
    case established(String)
    /// Another service had the name; this one now goes by the new name.
    case renamed(String)
    /// avahi-daemon is not running (or went away); publishing resumes when it is back.
    case daemonUnavailable(String)
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

/// Publishes `_partycast._tcp` with TXT records for as long as it lives. It survives avahi-daemon
/// being absent or restarting: one warning, then it publishes again when the daemon is back.
public final class ServicePublisher: @unchecked Sendable {
    // @unchecked: mutable state is touched only on avahi's poll thread, or with its lock held.
    private var connection: AvahiConnection?
    private var group: OpaquePointer?
    private var name: String
    private let port: UInt16
    private var txt: [String: String]
    private let onEvent: @Sendable (PublisherEvent) -> Void
    private var warnedUnavailable = false

    public init(name: String, port: Int, txt: [String: String], onEvent: @escaping @Sendable (PublisherEvent) -> Void) throws(PartyCastError) {
        self.name = name
        self.port = UInt16(port)
        self.txt = txt
        self.onEvent = onEvent
        let connection = try AvahiConnection(waitForDaemon: true) { [unowned self] state in clientChanged(state) }
        self.connection = connection
        // avahi reports "running" from inside avahi_client_new, before `connection` was set.
        if let client = connection.client, avahi_client_get_state(client) == AVAHI_CLIENT_S_RUNNING { publish() }
        try connection.start()
    }

    public var publishedName: String { connection?.locked { name } ?? name }

    private func clientChanged(_ state: AvahiClientState) {
        switch state {
        case AVAHI_CLIENT_S_RUNNING:
            warnedUnavailable = false
            publish()
        case AVAHI_CLIENT_S_COLLISION, AVAHI_CLIENT_S_REGISTERING:
            if let group { avahi_entry_group_reset(group) }
        case AVAHI_CLIENT_CONNECTING:
            // The daemon is away; its groups are gone with it.
            if let group { avahi_entry_group_free(group) }
            group = nil
            if !warnedUnavailable {
                warnedUnavailable = true
                onEvent(.daemonUnavailable("avahi-daemon is not running"))
            }
        case AVAHI_CLIENT_FAILURE:
            onEvent(.failed(connection?.lastError ?? "unknown"))
        default:
            break
        }
    }

    private func publish() {
        guard let client = connection?.client else { return }
        if group == nil {
            group = avahi_entry_group_new(client, { group, state, context in
                let publisher = Unmanaged<ServicePublisher>.fromOpaque(context!).takeUnretainedValue()
                publisher.groupChanged(state)
            }, Unmanaged.passUnretained(self).toOpaque())
        }
        guard let group else { return onEvent(.failed(connection?.lastError ?? "cannot create an entry group")) }
        guard avahi_entry_group_is_empty(group) != 0 else { return }
        let list = txtList()
        defer { avahi_string_list_free(list) }
        let added = avahi_entry_group_add_service_strlst(group, Int32(AVAHI_IF_UNSPEC), Int32(AVAHI_PROTO_INET), AvahiPublishFlags(rawValue: 0),
                                                         name, PartyCastService.type, nil, nil, port, list)
        if added == Int32(AVAHI_ERR_COLLISION) { return rename() }
        guard added >= 0, avahi_entry_group_commit(group) >= 0 else {
            return onEvent(.failed(AvahiConnection.message(added < 0 ? added : avahi_client_errno(client))))
        }
    }

    private func txtList() -> UnsafeMutablePointer<AvahiStringList>? {
        var list: UnsafeMutablePointer<AvahiStringList>? = nil
        for (key, value) in txt.sorted(by: { $0.key < $1.key }) { list = avahi_string_list_add_pair(list, key, value) }
        return list
    }

    /// Replaces the TXT records (a listener count, say) without withdrawing the service.
    public func update(txt: [String: String]) {
        connection?.locked {
            guard txt != self.txt else { return }
            self.txt = txt
            guard let group, avahi_entry_group_is_empty(group) == 0 else { return }
            let list = txtList()
            defer { avahi_string_list_free(list) }
            _ = avahi_entry_group_update_service_txt_strlst(group, Int32(AVAHI_IF_UNSPEC), Int32(AVAHI_PROTO_INET),
                                                            AvahiPublishFlags(rawValue: 0), name, PartyCastService.type, nil, list)
        }
    }

    private func groupChanged(_ state: AvahiEntryGroupState) {
        switch state {
        case AVAHI_ENTRY_GROUP_ESTABLISHED: onEvent(.established(name))
        case AVAHI_ENTRY_GROUP_COLLISION: rename()
        case AVAHI_ENTRY_GROUP_FAILURE: onEvent(.failed(connection?.lastError ?? "unknown"))
        default: break
        }
    }

    /// "Name" → "Name #2" → "Name #3"…, as avahi suggests.
    private func rename() {
        guard let alternative = avahi_alternative_service_name(name) else { return }
        name = String(cString: alternative)
        avahi_free(alternative)
        onEvent(.renamed(name))
        if let group { avahi_entry_group_reset(group) }
        publish()
    }

    /// Withdraws the service.
    public func stop() {
        guard let connection else { return }
        connection.locked {
            if let group { avahi_entry_group_free(group) }
            group = nil
        }
        connection.close()
        self.connection = nil
    }

    deinit { stop() }
}
