import CAvahi
import PartyCastCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A service found on the LAN.
public struct DiscoveredService: Sendable, Equatable {
    public var name: String
    /// The publishing host's mDNS name, "host.local".
    public var hostName: String
    /// Its IPv4 address, dotted.
    public var address: String
    public var port: Int
    public var txt: [String: String]

    public init(name: String, hostName: String, address: String, port: Int, txt: [String: String]) {
        self.name = name
        self.hostName = hostName
        self.address = address
        self.port = port
        self.txt = txt
    }
}

public enum PartyCastService {
    /// The DNS-SD type broadcasters publish.
    public static let type = "_partycast._tcp"
    /// The DNS-SD type of a Sendspin server that players dial (the Sendspin spec's).
    public static let sendspinServerType = "_sendspin-server._tcp"
}

/// Every avahi-client call PartyCast makes, each in a small function that turns a failure into a
/// `PartyCastError` carrying avahi's own words (avahi_strerror). Pointers to avahi's objects are
/// opaque; the callers own them and free them through the functions here.
enum Avahi {
    /// avahi's functions, resolved at the first poll loop (mDNS's first use), never before.
    private static let library = loadCLibrary("libavahi-client", code: .io, partycast_avahi_open)
    private static var functions: PartyCastAvahiFunctions {
        guard case .success(let functions) = library else { preconditionFailure("avahi called before newThreadedPoll loaded it") }
        return functions
    }

    static let anyInterface = AvahiIfIndex(AVAHI_IF_UNSPEC)
    static let ipv4 = AvahiProtocol(AVAHI_PROTO_INET)

    /// avahi's text for an error code ("Daemon not running", …).
    static func text(_ code: Int32) -> String { functions.avahi_strerror(code).map { String(cString: $0) } ?? "error \(code)" }

    static let unavailableAdvice = "avahi-daemon is not running: start it, or give the broadcaster's address (--host to join it, --url to control it)"

    /// `what` failed with avahi error `code`.
    static func error(_ what: String, _ code: Int32) -> PartyCastError {
        if code == Int32(AVAHI_ERR_NO_DAEMON) || code == Int32(AVAHI_ERR_DISCONNECTED) {
            return PartyCastError(.io, "\(unavailableAdvice) (avahi: \(what): \(text(code)))")
        }
        return PartyCastError(.io, "avahi: \(what): \(text(code))")
    }

    static func clientErrno(_ client: OpaquePointer) -> Int32 { functions.avahi_client_errno(client) }

    /// Throws when a call returning a negative avahi error code failed.
    static func check(_ result: Int32, _ what: @autoclosure () -> String) throws(PartyCastError) {
        if result < 0 { throw error(what(), result) }
    }

    // MARK: The poll loop (avahi's own thread)

    static func newThreadedPoll() throws(PartyCastError) -> OpaquePointer {
        let avahi = try library.get()
        guard let poll = avahi.avahi_threaded_poll_new() else { throw error("cannot create a poll loop", Int32(AVAHI_ERR_NO_MEMORY)) }
        return poll
    }

    static func pollAPI(_ poll: OpaquePointer) -> UnsafePointer<AvahiPoll>? { functions.avahi_threaded_poll_get(poll) }

    static func startPoll(_ poll: OpaquePointer) throws(PartyCastError) {
        try check(functions.avahi_threaded_poll_start(poll), "cannot start its poll thread")
    }

    /// Stops and joins the loop's thread; never from that thread.
    static func stopPoll(_ poll: OpaquePointer) { _ = functions.avahi_threaded_poll_stop(poll) }
    static func lockPoll(_ poll: OpaquePointer) { functions.avahi_threaded_poll_lock(poll) }
    static func unlockPoll(_ poll: OpaquePointer) { functions.avahi_threaded_poll_unlock(poll) }
    static func freePoll(_ poll: OpaquePointer) { functions.avahi_threaded_poll_free(poll) }

    /// A timeout firing `milliseconds` from now on the loop's thread, or disarmed when nil.
    static func newTimeout(_ api: UnsafePointer<AvahiPoll>, milliseconds: Int?, _ callback: AvahiTimeoutCallback,
                           _ context: UnsafeMutableRawPointer) throws(PartyCastError) -> OpaquePointer {
        var avahi = functions
        guard let timeout = partycast_avahi_timeout_new(&avahi, api, Int32(milliseconds ?? -1), callback, context) else {
            throw error("cannot create a timer", Int32(AVAHI_ERR_NO_MEMORY))
        }
        return timeout
    }

    static func arm(_ api: UnsafePointer<AvahiPoll>, _ timeout: OpaquePointer, milliseconds: Int?) {
        var avahi = functions
        partycast_avahi_timeout_update(&avahi, api, timeout, Int32(milliseconds ?? -1))
    }

    static func freeTimeout(_ api: UnsafePointer<AvahiPoll>, _ timeout: OpaquePointer) { partycast_avahi_timeout_free(api, timeout) }

    // MARK: The client (the D-Bus connection to avahi-daemon)

    /// With `waitForDaemon` (AVAHI_CLIENT_NO_FAIL) the client exists even while avahi-daemon is
    /// away, in state CONNECTING; it still fails when the system D-Bus itself is unreachable.
    /// The callback may run before this returns, from inside avahi_client_new.
    /// `code` receives avahi's error code on failure.
    static func newClient(_ api: UnsafePointer<AvahiPoll>, waitForDaemon: Bool, _ callback: AvahiClientCallback,
                          _ context: UnsafeMutableRawPointer, code: inout Int32) throws(PartyCastError) -> OpaquePointer {
        let flags = waitForDaemon ? AVAHI_CLIENT_NO_FAIL : AvahiClientFlags(rawValue: 0)
        guard let client = functions.avahi_client_new(api, flags, callback, context, &code) else {
            throw error("cannot connect to avahi-daemon", code)
        }
        return client
    }

    static func freeClient(_ client: OpaquePointer) { functions.avahi_client_free(client) }

    // MARK: Publishing

    static func newEntryGroup(_ client: OpaquePointer, _ callback: AvahiEntryGroupCallback,
                              _ context: UnsafeMutableRawPointer) throws(PartyCastError) -> OpaquePointer {
        guard let group = functions.avahi_entry_group_new(client, callback, context) else {
            throw error("cannot create an entry group", clientErrno(client))
        }
        return group
    }

    static func freeEntryGroup(_ group: OpaquePointer) { _ = functions.avahi_entry_group_free(group) }

    static func isEmpty(_ group: OpaquePointer) -> Bool { functions.avahi_entry_group_is_empty(group) != 0 }

    /// Adds the service (IPv4, every interface) to the group; false when this avahi-daemon already
    /// holds a service of that name (a local collision: pick another name).
    static func addService(_ group: OpaquePointer, name: String, type: String, port: UInt16, txt: [String: String]) throws(PartyCastError) -> Bool {
        let result = withStringList(txt) { list in
            functions.avahi_entry_group_add_service_strlst(group, anyInterface, ipv4, AvahiPublishFlags(rawValue: 0),
                                                 name, type, nil, nil, port, list)
        }
        if result == Int32(AVAHI_ERR_COLLISION) { return false }
        try check(result, "cannot add service \"\(name)\"")
        return true
    }

    static func commit(_ group: OpaquePointer) throws(PartyCastError) {
        try check(functions.avahi_entry_group_commit(group), "cannot publish the entry group")
    }

    static func reset(_ group: OpaquePointer) throws(PartyCastError) {
        try check(functions.avahi_entry_group_reset(group), "cannot withdraw the entry group")
    }

    static func updateTXT(_ group: OpaquePointer, name: String, type: String, txt: [String: String]) throws(PartyCastError) {
        let result = withStringList(txt) { list in
            functions.avahi_entry_group_update_service_txt_strlst(group, anyInterface, ipv4, AvahiPublishFlags(rawValue: 0),
                                                        name, type, nil, list)
        }
        try check(result, "cannot update the TXT records of \"\(name)\"")
    }

    /// "Name" → "Name #2" → "Name #3"…, avahi's choice.
    static func alternativeName(_ name: String) -> String {
        guard let alternative = functions.avahi_alternative_service_name(name) else { return name + " #2" }
        defer { functions.avahi_free(alternative) }
        return String(cString: alternative)
    }

    // MARK: Browsing and resolving

    static func newServiceBrowser(_ client: OpaquePointer, type: String, _ callback: AvahiServiceBrowserCallback,
                                  _ context: UnsafeMutableRawPointer) throws(PartyCastError) -> OpaquePointer {
        guard let browser = functions.avahi_service_browser_new(client, anyInterface, ipv4, type, nil,
                                                      AvahiLookupFlags(rawValue: 0), callback, context) else {
            throw error("cannot browse for \(type)", clientErrno(client))
        }
        return browser
    }

    static func freeServiceBrowser(_ browser: OpaquePointer) { _ = functions.avahi_service_browser_free(browser) }

    static func browserClient(_ browser: OpaquePointer) -> OpaquePointer? { functions.avahi_service_browser_get_client(browser) }

    /// Resolves a browsed service to its host, IPv4 address, port and TXT records.
    static func newServiceResolver(_ client: OpaquePointer, interface: AvahiIfIndex, protocol: AvahiProtocol,
                                   name: UnsafePointer<CChar>, type: UnsafePointer<CChar>, domain: UnsafePointer<CChar>?,
                                   _ callback: AvahiServiceResolverCallback, _ context: UnsafeMutableRawPointer) throws(PartyCastError) -> OpaquePointer {
        guard let resolver = functions.avahi_service_resolver_new(client, interface, `protocol`, name, type, domain, ipv4,
                                                        AvahiLookupFlags(rawValue: 0), callback, context) else {
            throw error("cannot resolve \"\(String(cString: name))\"", clientErrno(client))
        }
        return resolver
    }

    static func freeServiceResolver(_ resolver: OpaquePointer) { _ = functions.avahi_service_resolver_free(resolver) }

    static func addressText(_ address: UnsafePointer<AvahiAddress>) -> String {
        var text = [CChar](repeating: 0, count: Int(AVAHI_ADDRESS_STR_MAX))
        guard functions.avahi_address_snprint(&text, text.count, address) != nil else { return "" }
        return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    // MARK: TXT records

    /// Runs `body` with `txt` as an avahi string list ("key=value" items, sorted by key), freed after.
    static func withStringList<T>(_ txt: [String: String], _ body: (UnsafeMutablePointer<AvahiStringList>?) -> T) -> T {
        var list: UnsafeMutablePointer<AvahiStringList>? = nil
        for (key, value) in txt.sorted(by: { $0.key > $1.key }) { list = functions.avahi_string_list_add_pair(list, key, value) }
        defer { functions.avahi_string_list_free(list) }
        return body(list)
    }

    static func pairs(_ list: UnsafeMutablePointer<AvahiStringList>?) -> [String: String] {
        var result: [String: String] = [:]
        var item = list
        while let current = item {
            var key: UnsafeMutablePointer<CChar>? = nil
            var value: UnsafeMutablePointer<CChar>? = nil
            if functions.avahi_string_list_get_pair(current, &key, &value, nil) == 0, let key {
                result[String(cString: key)] = value.map { String(cString: $0) } ?? ""
                functions.avahi_free(key)
                if let value { functions.avahi_free(value) }
            }
            item = functions.avahi_string_list_get_next(current)
        }
        return result
    }

    /// What avahi accepts as a TXT record: a key without "=", each "key=value" at most 255 bytes.
    static func validate(txt: [String: String]) throws(PartyCastError) {
        for (key, value) in txt {
            guard !key.isEmpty, !key.contains("="), key.utf8.count + 1 + value.utf8.count <= 255 else {
                throw PartyCastError(.invalidArgument, "mDNS TXT record \"\(key)=\(value)\": keys are non-empty without \"=\", and each record at most 255 bytes")
            }
        }
    }
}

/// avahi's threaded poll: avahi-client runs on a thread of its own, and calls back on it with the
/// loop's lock held. Other threads take the lock (`locked`) before touching avahi objects.
final class AvahiLoop: @unchecked Sendable {
    // @unchecked: `running` (read by locked()) is set only by start()/stop(), which must not overlap locked() calls; the loop thread's id is behind a lock.
    let poll: OpaquePointer
    let api: UnsafePointer<AvahiPoll>
    private var running = false
    private let loopThread = LockedValueBox<pthread_t?>(nil)
    private var probe: OpaquePointer?
    /// Signalled by whatever a caller waits on (the probe, a browse's callbacks): `wait` wakes only then.
    let changed = Wakeup()

    init() throws(PartyCastError) {
        poll = try Avahi.newThreadedPoll()
        guard let api = Avahi.pollAPI(poll) else {
            Avahi.freePoll(poll)
            throw Avahi.error("cannot get its poll loop's interface", Int32(AVAHI_ERR_NO_MEMORY))
        }
        self.api = api
        // The loop's first act: note which thread it is, so `locked` called from a callback does
        // not deadlock on the (non-recursive) loop lock.
        do {
            probe = try Avahi.newTimeout(api, milliseconds: 0, { timeout, context in
                let loop = Unmanaged<AvahiLoop>.fromOpaque(context!).takeUnretainedValue()
                loop.loopThread.withLockedValue { $0 = pthread_self() }
                loop.changed.signal()
            }, Unmanaged.passUnretained(self).toOpaque())
        } catch {
            Avahi.freePoll(poll)
            throw error
        }
    }

    /// Starts avahi's thread, and returns once it has noted who it is (within a second, say).
    func start() throws(PartyCastError) {
        try Avahi.startPoll(poll)
        running = true
        let deadline = monotonicNanoseconds() + 2_000_000_000
        wait(until: deadline) { loopThread.withLockedValue { $0 != nil } }
    }

    /// Returns once `done` holds or the deadline passed, waking when `changed` is signalled.
    func wait(until deadline: UInt64, _ done: () -> Bool) {
        while !done() {
            let now = monotonicNanoseconds()
            guard now < deadline else { return }
            changed.wait(nanoseconds: deadline - now)
        }
    }

    /// True on avahi's thread (inside a callback).
    var isLoopThread: Bool {
        loopThread.withLockedValue { thread in thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Runs `body` holding the loop's lock (or directly when already inside a callback).
    func locked<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        if !running || isLoopThread { return try body() }
        Avahi.lockPoll(poll)
        defer { Avahi.unlockPoll(poll) }
        return try body()
    }

    /// Stops and joins avahi's thread: no callback runs after this returns.
    func stop() {
        guard running else { return }
        precondition(!isLoopThread, "an avahi loop cannot be stopped from one of its own callbacks")
        Avahi.stopPoll(poll)
        running = false
    }

    deinit {
        stop()
        Avahi.freePoll(poll)  // frees the timeouts with it
    }
}
