// Web push on this browser (spec §11): registers Holdpoint's service worker, and subscribes this browser when its
// person asks from the Settings page (a button with `data-push-subscribe`, its session's CSRF token in
// `data-csrf`, and a `data-push-status` element for what happened). Loaded by every page; where a browser cannot
// receive pushes it only says so when asked.

const canPush = 'serviceWorker' in navigator && 'PushManager' in window && 'Notification' in window;

if ('serviceWorker' in navigator) {
  navigator.serviceWorker.register('/service-worker.js').catch(() => {});
}

function bytesOfBase64Url(text) {
  const base64 = text.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (text.length % 4)) % 4);
  return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
}

async function subscribe(button) {
  if (!canPush) return 'This browser cannot receive push notifications.';
  const permission = await Notification.requestPermission();
  if (permission !== 'granted') return 'Notifications are blocked for this site in the browser\u2019s settings.';
  const key = await (await fetch('/api/v1/push/public-key', { credentials: 'same-origin' })).json();
  if (!key.enabled) return 'This Holdpoint sends no push notifications: an admin sets HOLDPOINT_VAPID_SUBJECT.';
  const registration = await navigator.serviceWorker.ready;
  const subscription = await registration.pushManager.subscribe({
    userVisibleOnly: true,
    applicationServerKey: bytesOfBase64Url(key.public_key),
  });
  const response = await fetch('/api/v1/me/push-subscriptions', {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json', 'x-csrf-token': button.dataset.csrf || '' },
    body: JSON.stringify(subscription),
  });
  if (response.ok) return 'Push notifications are on for this browser.';
  const refused = await response.json().catch(() => null);
  return `Holdpoint refused the subscription: ${refused?.error?.message ?? response.status}`;
}

document.addEventListener('click', (event) => {
  const button = event.target instanceof Element ? event.target.closest('[data-push-subscribe]') : null;
  if (!button) return;
  event.preventDefault();
  const status = document.querySelector('[data-push-status]');
  const say = (text) => { if (status) status.textContent = text; };
  button.disabled = true;
  say('Asking the browser\u2026');
  subscribe(button)
    .then(say, (error) => say(`This browser could not subscribe: ${error.message}`))
    .finally(() => { button.disabled = false; });
});
