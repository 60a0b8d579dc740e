/**
 * The `HOST:PORT` grammar of the listen flags (`--listen`, `--metrics-listen`): a host name or
 * IPv4 address, `[V6]`, or nothing before the colon (every address, `0.0.0.0`). One parser, so the
 * flags cannot drift apart in what they accept.
 */

/** `HOST:PORT`, `[V6]:PORT` or `:PORT` (and a bare `PORT` when `barePort`); undefined when malformed. */
export const parse = (text: string, options: { readonly barePort?: boolean } = {}): { readonly host: string; readonly port: number } | undefined => {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d+)$/.exec(text) ?? (options.barePort === true ? /^()()(\d+)$/.exec(text) : null)
  const port = Number(m?.[3])
  if (m === null || !Number.isInteger(port) || port < 0 || port > 65535) return undefined
  const host = m[1] ?? m[2] ?? ""
  return { host: host === "" ? "0.0.0.0" : host, port }
}
