// A minimal SMTP server on loopback for browser tests that read the mail Holdpoint sends (email verification
// links): it accepts every message in the clear (Holdpoint sends to it with `?tls=none`) and keeps each one's
// envelope and raw text. Enough of RFC 5321 for one well-behaved client: EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP,
// QUIT.

import { createServer } from 'node:net';

/** Starts the sink; `messages` fills as messages arrive, `url` is what HOLDPOINT_SMTP_URL takes. */
export async function startSmtpSink() {
  const messages = [];
  const server = createServer((socket) => {
    socket.setEncoding('utf8');
    let buffer = '';
    let inData = false;
    let envelope = { from: null, to: [] };
    const reply = (line) => socket.write(`${line}\r\n`);
    reply('220 sink.test ESMTP');
    socket.on('data', (chunk) => {
      buffer += chunk;
      for (;;) {
        if (inData) {
          const end = buffer.indexOf('\r\n.\r\n');
          if (end < 0) return;
          const data = buffer.slice(0, end).replace(/\r\n\.\./g, '\r\n.');
          buffer = buffer.slice(end + 5);
          inData = false;
          messages.push({ ...envelope, data });
          envelope = { from: null, to: [] };
          reply('250 Message accepted');
          continue;
        }
        const newline = buffer.indexOf('\r\n');
        if (newline < 0) return;
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + 2);
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === 'EHLO') socket.write('250-sink.test\r\n250 8BITMIME\r\n');
        else if (verb === 'HELO' || verb === 'NOOP' || verb === 'RSET') reply('250 OK');
        else if (verb === 'MAIL') {
          envelope.from = line.match(/<([^>]*)>/)?.[1] ?? null;
          reply('250 OK');
        } else if (verb === 'RCPT') {
          envelope.to.push(line.match(/<([^>]*)>/)?.[1]);
          reply('250 OK');
        } else if (verb === 'DATA') {
          inData = true;
          reply('354 End data with <CR><LF>.<CR><LF>');
        } else if (verb === 'QUIT') {
          reply('221 Bye');
          socket.end();
          return;
        } else reply('502 Not implemented');
      }
    });
    socket.on('error', () => {});
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `smtp://127.0.0.1:${port}?tls=none`,
    messages,
    async stop() {
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The text of a message with its transfer encodings undone well enough to find a link: quoted-printable soft line
 * breaks and escapes, and every base64 body part decoded beside the raw text. */
export function readableText(raw) {
  const unquoted = raw.replace(/=\r\n/g, '').replace(/=([0-9A-F]{2})/g, (_, hex) => String.fromCharCode(parseInt(hex, 16)));
  const decoded = [...raw.matchAll(/\r\n\r\n([A-Za-z0-9+/=\r\n]{40,})(?=\r\n--|$)/g)]
    .map((m) => Buffer.from(m[1].replace(/\r\n/g, ''), 'base64').toString('utf8'));
  return [unquoted, ...decoded].join('\n');
}
