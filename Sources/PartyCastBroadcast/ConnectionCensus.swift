import NIOConcurrencyHelpers
import NIOCore
import PartyCastControlSeam

/// The stream port's connections, per address and in total, each capped: a guest cannot hold more
/// than `perAddress` of the broadcaster's descriptors, nor a crowd more than `total`.
///
/// An address at its cap does not lock out its own real listener: the newcomer takes the place of
/// that address's oldest connection that has not yet proved to be a listener (a joined connection
/// that reported its status). Listeners on one machine share its address, and a guest's flood of
/// half-open or silent connections is exactly what gets pushed out. A full port likewise makes room
/// from the address holding the most, if it holds more than the newcomer's.
final class ConnectionCensus: Sendable {
    static let defaultPerAddress = 32
    static let defaultTotal = 256

    struct Entry {
        let id: UInt64
        let channel: Channel
        var proven = false
    }

    struct State {
        /// Each address's connections, oldest first.
        var byAddress: [String: [Entry]] = [:]
        var total = 0
        var nextID: UInt64 = 0
    }

    enum Admission {
        /// Admitted as `id`; `evicted` must be closed to make room for it.
        case admitted(id: UInt64, evicted: Channel?)
        case refused(Refusals.Kind)
    }

    let perAddress: Int
    let total: Int
    private let state = NIOLockedValueBox(State())

    init(perAddress: Int = ConnectionCensus.defaultPerAddress, total: Int = ConnectionCensus.defaultTotal) {
        self.perAddress = max(1, perAddress)
        self.total = max(1, total)
    }

    func admit(_ channel: Channel, address: String) -> Admission {
        state.withLockedValue { s in
            var evicted: Channel?
            let mine = s.byAddress[address]?.count ?? 0
            if mine >= perAddress {
                guard let channel = Self.evictOldestUnproven(of: address, in: &s) else { return .refused(.connectionsPerAddress) }
                evicted = channel
            } else if s.total >= total {
                // The crowd's largest address makes room, if the newcomer's holds fewer.
                guard let (largest, entries) = s.byAddress.max(by: { $0.value.count < $1.value.count }), entries.count > mine + 1,
                      let channel = Self.evictOldestUnproven(of: largest, in: &s) else { return .refused(.connectionsTotal) }
                evicted = channel
            }
            s.nextID &+= 1
            s.byAddress[address, default: []].append(Entry(id: s.nextID, channel: channel))
            s.total += 1
            return .admitted(id: s.nextID, evicted: evicted)
        }
    }

    /// The connection proved to be a real listener: it is no longer the first to make room.
    func prove(_ id: UInt64, address: String) {
        state.withLockedValue { s in
            guard let index = s.byAddress[address]?.firstIndex(where: { $0.id == id }) else { return }
            s.byAddress[address]?[index].proven = true
        }
    }

    /// The connection closed (a no-op for one evicted already).
    func release(_ id: UInt64, address: String) {
        state.withLockedValue { s in
            guard let index = s.byAddress[address]?.firstIndex(where: { $0.id == id }) else { return }
            s.byAddress[address]?.remove(at: index)
            s.total -= 1
            if s.byAddress[address]?.isEmpty == true { s.byAddress.removeValue(forKey: address) }
        }
    }

    var count: Int { state.withLockedValue { $0.total } }

    private static func evictOldestUnproven(of address: String, in s: inout State) -> Channel? {
        guard let index = s.byAddress[address]?.firstIndex(where: { !$0.proven }),
              let entry = s.byAddress[address]?.remove(at: index) else { return nil }
        s.total -= 1
        return entry.channel
    }
}
