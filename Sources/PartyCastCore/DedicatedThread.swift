#if canImport(Glibc)
import Glibc
#endif

/// A plain POSIX thread for work that must not share a cooperative pool: audio output (which
/// blocks in the device) and the decoder feeding it.
public final class DedicatedThread: @unchecked Sendable {
    // @unchecked: `thread` is written once in init, then only read by join() on the owning thread.
    private var thread = pthread_t()
    private final class Box { let body: () -> Void; init(_ body: @escaping () -> Void) { self.body = body } }

    public init(_ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        let result = pthread_create(&thread, nil, { argument in
            let box = Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue()
            box.body()
            return nil
        }, box)
        precondition(result == 0, "pthread_create failed: \(result)")
    }

    public func join() {
        pthread_join(thread, nil)
    }
}
