// Holdpoint's service worker (spec §11): shows each question pushed to this browser as a notification with its
// answers as actions, answers from an action through the question's action link, and replaces the notification
// (same tag) when the question is resolved. Its handlers are functions of their own so that a test can drive them
// with a synthetic push and click: Chromium cannot reach a real push service from a test machine.

self.addEventListener('install', () => self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));

self.addEventListener('push', (event) => {
  let message = null;
  try {
    message = event.data ? event.data.json() : null;
  } catch {
    return;
  }
  if (message) event.waitUntil(self.showPushed(message));
});

self.addEventListener('notificationclick', (event) => {
  event.waitUntil(self.onNotificationClick(event.notification, event.action));
});

// A pushed message as a notification: a question with its answers (at most the two actions browsers show; the
// notification itself opens the question), or the question resolved, replacing the first under the same tag.
self.showPushed = async (message) => {
  if (!message.tag || !message.title) return;
  const answers = Array.isArray(message.actions) ? message.actions.slice(0, 2) : [];
  await self.registration.showNotification(message.title, {
    body: message.body || '',
    tag: message.tag,
    renotify: message.type === 'question',
    requireInteraction: Boolean(message.require_interaction),
    actions: answers.map((answer) => ({ action: answer.action, title: answer.title })),
    data: { url: message.url, title: message.title, answers },
  });
};

// A click: an answer's action posts its action link (which answers as the person it was sent to, with every rule an
// answer in Holdpoint has) and says how it went under the same tag; a click on the notification opens the question.
self.onNotificationClick = async (notification, action) => {
  notification.close();
  const data = notification.data || {};
  const answer = (data.answers || []).find((candidate) => candidate.action === action);
  if (!answer) return openQuestion(data.url);
  let response;
  try {
    response = await fetch(answer.url, { method: 'POST', credentials: 'omit' });
  } catch {
    response = null;
  }
  const outcome = response && response.ok
    ? { title: `${answer.title}: recorded`, body: data.title }
    : { title: 'Not answered', body: refusal(response ? response.status : 0) };
  await self.registration.showNotification(outcome.title, {
    body: outcome.body,
    tag: notification.tag,
    data: { url: data.url, title: data.title, answers: [] },
  });
};

function refusal(status) {
  switch (status) {
    case 409: return 'Someone answered this question first. Open it to see how.';
    case 410: return 'This link has expired. Open the question to answer it.';
    case 0: return 'Holdpoint could not be reached. Try again, or open the question.';
    default: return 'Holdpoint refused this answer. Open the question to see why.';
  }
}

async function openQuestion(url) {
  if (!url) return;
  const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  const open = windows.find((client) => client.url === url);
  if (open) return open.focus();
  return self.clients.openWindow(url);
}
