/**
 * The box's pod IP allocations, persisted: core's pure `Ipam` state in one JSON file,
 * `DATA/network/ipam.json`, rewritten atomically (sibling + rename) before an address is handed
 * out, so a box that restarts (or crashes right after) never gives an address twice. On open,
 * addresses of sandboxes the box no longer knows are released (a crash between allocating and
 * recording the sandbox).
 */
import { Ipam as Pure } from "@koder/fleet-core"
import { randomBytes } from "node:crypto"
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Either } from "effect"

/** The persisted allocator of one box. */
export class IpamStore {
  private state: Pure.State | undefined
  private readonly file: string

  private constructor(dataDir: string) {
    const dir = join(dataDir, "network")
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    this.file = join(dir, "ipam.json")
    try {
      this.state = JSON.parse(readFileSync(this.file, "utf8")) as Pure.State
    } catch {
      this.state = undefined
    }
  }

  /** Open the allocations in `dataDir`, keeping only those of `alive` sandboxes. */
  static open(dataDir: string, alive: ReadonlySet<string>): IpamStore {
    const s = new IpamStore(dataDir)
    if (s.state !== undefined) {
      const kept = Pure.retain(s.state, alive)
      if (kept !== s.state) s.save(kept)
    }
    return s
  }

  /** Every allocation: address → sandbox id. */
  allocations(): Readonly<Record<string, string>> {
    return this.state?.allocations ?? {}
  }

  /**
   * An address of `cidr` for `owner` (the one it holds already, on a retry). The block may
   * change only while nothing is allocated: the Node's pod CIDR is immutable, so a different one
   * means another cluster, and pods still holding old addresses would be unreachable.
   */
  allocate(cidr: string, owner: string): string {
    let state = this.state
    if (state === undefined || state.cidr !== cidr) {
      if (state !== undefined && Object.keys(state.allocations).length > 0)
        throw new Error(`the node's pod CIDR is ${cidr}, but pods still hold addresses of ${state.cidr}`)
      state = Pure.empty(cidr)
    }
    const r = Pure.allocate(state, owner)
    if (Either.isLeft(r)) throw new Error(r.left)
    if (r.right.state !== state || state !== this.state) this.save(r.right.state)
    return r.right.ip
  }

  /** Release `owner`'s address (none: nothing happens). */
  release(owner: string): void {
    if (this.state === undefined) return
    const next = Pure.release(this.state, owner)
    if (next !== this.state) this.save(next)
  }

  private save(state: Pure.State) {
    const tmp = `${this.file}.${randomBytes(4).toString("hex")}.tmp`
    writeFileSync(tmp, JSON.stringify(state), { mode: 0o600 })
    renameSync(tmp, this.file)
    this.state = state
  }
}
