import Synchronization

/// A lock-free single-producer single-consumer ring of Float32 samples.
///
/// All storage is allocated up front; `write` and `read` never allocate, lock or block, so the
/// consumer side is safe on a real-time audio thread. Exactly one thread may write and one may read.
public final class SPSCRing: @unchecked Sendable {
    // @unchecked: producer and consumer touch disjoint slots, handed over by the acquire/release indices.
    private let storage: UnsafeMutablePointer<Float>
    public let capacity: Int
    private let mask: Int
    /// Total samples ever read / written; they only grow, so full and empty are distinguishable.
    private let readIndex = Atomic<Int>(0)
    private let writeIndex = Atomic<Int>(0)

    /// - Parameter minimumCapacity: rounded up to a power of two.
    public init(minimumCapacity: Int) {
        var size = 1
        while size < max(minimumCapacity, 2) { size <<= 1 }
        capacity = size
        mask = size - 1
        storage = .allocate(capacity: size)
        storage.initialize(repeating: 0, count: size)
    }

    deinit { storage.deallocate() }

    /// Samples ready to read (consumer) — a lower bound as seen from the producer.
    public var availableToRead: Int {
        writeIndex.load(ordering: .acquiring) &- readIndex.load(ordering: .acquiring)
    }

    /// Space free to write (producer) — a lower bound as seen from the consumer.
    public var availableToWrite: Int { capacity - availableToRead }

    /// Producer: copies as many samples as fit; returns how many were written.
    @discardableResult
    public func write(_ source: UnsafeBufferPointer<Float>) -> Int {
        let w = writeIndex.load(ordering: .relaxed)
        let r = readIndex.load(ordering: .acquiring)
        let count = min(source.count, capacity - (w &- r))
        guard count > 0, let base = source.baseAddress else { return 0 }
        let start = w & mask
        let first = min(count, capacity - start)
        (storage + start).update(from: base, count: first)
        if count > first { storage.update(from: base + first, count: count - first) }
        writeIndex.store(w &+ count, ordering: .releasing)
        return count
    }

    /// Consumer: copies up to `destination.count` samples out; returns how many were read.
    @discardableResult
    public func read(into destination: UnsafeMutableBufferPointer<Float>) -> Int {
        let r = readIndex.load(ordering: .relaxed)
        let w = writeIndex.load(ordering: .acquiring)
        let count = min(destination.count, w &- r)
        guard count > 0, let base = destination.baseAddress else { return 0 }
        let start = r & mask
        let first = min(count, capacity - start)
        base.update(from: storage + start, count: first)
        if count > first { (base + first).update(from: storage, count: count - first) }
        readIndex.store(r &+ count, ordering: .releasing)
        return count
    }

    /// Consumer: drops all but the first `count` samples waiting to be read, from the end (a cut:
    /// the producer's last writes are withdrawn). Legal only while the producer is parked, not
    /// writing, until the consumer tells it through a release/acquire handshake (the renderer's cut
    /// tickets) that it may go on: it moves the producer's index back.
    public func truncate(keeping count: Int) {
        let r = readIndex.load(ordering: .relaxed)
        let w = writeIndex.load(ordering: .acquiring)
        guard count >= 0, count < w &- r else { return }
        writeIndex.store(r &+ count, ordering: .releasing)
    }

    /// Consumer: drops up to `count` samples; returns how many were dropped.
    @discardableResult
    public func discard(_ count: Int) -> Int {
        let r = readIndex.load(ordering: .relaxed)
        let n = min(count, writeIndex.load(ordering: .acquiring) &- r)
        readIndex.store(r &+ n, ordering: .releasing)
        return n
    }
}
