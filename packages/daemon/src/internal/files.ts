/**
 * Writing the data dir's files: atomically (write a sibling, then rename) so a crash never
 * leaves half a key or half a kubeconfig, and with the mode set on the new file, so secrets are
 * never readable by others even for a moment.
 */
import { randomBytes } from "node:crypto"
import { lstatSync, mkdirSync } from "node:fs"
import { chmod, mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises"
import { dirname } from "node:path"

/** Create a directory (and its parents) readable only by the owner. */
export const ensureDir = async (dir: string): Promise<void> => {
  await mkdir(dir, { recursive: true, mode: 0o700 })
}

/**
 * Create the data dir, or narrow an existing one, to 0700: it holds the store, keys, tokens and
 * the box's socket, and nothing in it is anyone else's business.
 */
export const ensurePrivateDir = async (dir: string): Promise<void> => {
  await ensureDir(dir)
  // Never a shared directory someone pointed the data dir at (/tmp: sticky).
  const mode = (await stat(dir)).mode
  if ((mode & 0o077) !== 0 && (mode & 0o1000) === 0) await chmod(dir, 0o700)
}

/** Replace `path` with `data` atomically; the file ends up with `mode` (default 0600). */
export const writeAtomic = async (path: string, data: string, mode = 0o600): Promise<void> => {
  await ensureDir(dirname(path))
  const tmp = `${path}.${randomBytes(6).toString("hex")}.tmp`
  try {
    await writeFile(tmp, data, { mode, flag: "wx" })
    await chmod(tmp, mode) // the umask may have narrowed or the mode; make it exact
    await rename(tmp, path)
  } catch (e) {
    await rm(tmp, { force: true })
    throw e
  }
}

/** The file's text, or `undefined` when it does not exist. */
export const readIfExists = async (path: string): Promise<string | undefined> => {
  try {
    return await readFile(path, "utf8")
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined
    throw e
  }
}

/**
 * `dir`, made if missing, when it is a real directory of this user that nobody else can enter
 * (/dev/shm is everyone's: a name taken by another user is not ours); else undefined.
 */
export const privateDirSync = (dir: string): string | undefined => {
  try {
    mkdirSync(dir, { mode: 0o700 })
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") return undefined
  }
  try {
    const st = lstatSync(dir)
    return st.isDirectory() && st.uid === (process.getuid?.() ?? st.uid) && (st.mode & 0o077) === 0 ? dir : undefined
  } catch {
    return undefined
  }
}
