/**
 * The per-user memory budget of watches (issue 29): a watch's backlog is the bytes it owes its
 * client and has not yet handed to the kernel — the rest of its initial state (reserved when the
 * watch is admitted) plus what was written to the socket and is still buffered in the process
 * (the TLS layer keeps its own encrypted copy per connection). One user's backlogs together stay
 * under `bytesPerUser`: a new watch that would pass it is refused (429), and a running watch whose
 * write would pass it is to be closed. A user's only watch is always admitted and never closed
 * for the budget, so one large namespace can still be watched; the HTTP layer's per-watch window
 * and stall timeout bound that one.
 *
 *   admit(user, initial) ─▶ Backlog { reserved = initial }      429 when over, unless first
 *   write(n)   reserved ─▶ unsent (only growth past the reservation counts anew)
 *   flushed(n) unsent ↓                release() frees all of it (watch over, socket gone)
 *
 * Pure accounting, no I/O: the HTTP layer calls it from its write path.
 */

/** The default budget per user: 64 MiB. */
export const defaultBytesPerUser = 64 * 1024 * 1024

/** One admitted watch's share of its user's budget. */
export interface Backlog {
  readonly user: string
  /** Bytes of the initial state not yet written. */
  readonly reserved: () => number
  /** Bytes written to the socket whose write has not completed. */
  readonly unsent: () => number
  /**
   * Account `bytes` handed to the socket. `false` when this pushes the user past the budget and
   * the user has other backlogs: the caller closes this watch (and calls `release`).
   */
  readonly write: (bytes: number) => boolean
  /** `bytes` of earlier writes reached the kernel. */
  readonly flushed: (bytes: number) => void
  /** The watch ended or its connection is gone: return everything it held. Idempotent. */
  readonly release: () => void
}

/** The accounts of every user with an open watch. */
export interface WatchBudget {
  readonly bytesPerUser: number
  /**
   * Admit a watch that starts by owing `initialBytes`, or `undefined` (answer 429) when the user
   * already has a backlog and this one would take the total past the budget.
   */
  readonly admit: (user: string, initialBytes: number) => Backlog | undefined
  /** A user's backlog in bytes (0 when none). */
  readonly used: (user: string) => number
  /** Every user's backlog together, for metrics. */
  readonly total: () => number
}

interface Account {
  bytes: number
  watches: number
}

/** A budget of `bytesPerUser` (0: no limit, only accounting). */
export const make = (bytesPerUser: number = defaultBytesPerUser): WatchBudget => {
  const accounts = new Map<string, Account>()
  let total = 0
  const limited = bytesPerUser > 0

  const admit = (user: string, initialBytes: number): Backlog | undefined => {
    const existing = accounts.get(user)
    const initial = Math.max(0, initialBytes)
    if (limited && existing !== undefined && existing.bytes > 0 && existing.bytes + initial > bytesPerUser) return undefined
    const account = existing ?? { bytes: 0, watches: 0 }
    if (existing === undefined) accounts.set(user, account)
    account.watches++
    account.bytes += initial
    total += initial
    let reserved = initial
    let unsent = 0
    let released = false
    const change = (delta: number) => {
      account.bytes += delta
      total += delta
    }
    return {
      user,
      reserved: () => reserved,
      unsent: () => unsent,
      write: (bytes) => {
        if (released) return false
        const fromReservation = Math.min(bytes, reserved)
        reserved -= fromReservation
        unsent += bytes
        change(bytes - fromReservation)
        return !limited || account.bytes <= bytesPerUser || account.watches === 1
      },
      flushed: (bytes) => {
        if (released) return
        const n = Math.min(bytes, unsent)
        unsent -= n
        change(-n)
      },
      release: () => {
        if (released) return
        released = true
        change(-(reserved + unsent))
        reserved = 0
        unsent = 0
        account.watches--
        if (account.watches === 0) accounts.delete(user)
      }
    }
  }

  return {
    bytesPerUser,
    admit,
    used: (user) => accounts.get(user)?.bytes ?? 0,
    total: () => total
  }
}
