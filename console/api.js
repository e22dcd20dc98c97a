// The API, called from the page: the key from session storage as a bearer token,
// answers unwrapped from {"success", "data"}, failures as ApiError with the API's words.
const KEY_ITEM = 'kb-console-api-key';
// The page is served at <api base>/console: /api/console on AWS,
// /restapis/<id>/api/_user_request_/console on the local emulator.
export const BASE = location.pathname.replace(/\/console\/?$/, '');

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
  toString() { return `${this.code}: ${this.message}`; }
}

export const session = {
  get key() { return sessionStorage.getItem(KEY_ITEM); },
  set(key) { sessionStorage.setItem(KEY_ITEM, key.trim()); },
  clear() { sessionStorage.removeItem(KEY_ITEM); },
};

async function readJson(response) {
  try {
    return await response.json();
  } catch {
    throw new ApiError(response.status, 'BAD_RESPONSE', `the API answered ${response.status} without JSON`);
  }
}

// raw: answer the whole body (a tool invocation answers the tool result itself).
export async function api(method, path, body, { raw = false } = {}) {
  const headers = { Authorization: `Bearer ${session.key || ''}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(BASE + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (err) {
    throw new ApiError(0, 'CONNECTION_FAILED', `the API did not answer (${err.message})`);
  }
  const payload = await readJson(response);
  const error = payload && payload.error;
  if (error && typeof error === 'object') {
    const failure = new ApiError(response.status, error.code || 'ERROR', error.message || 'the request failed');
    if (response.status === 401) window.dispatchEvent(new CustomEvent('kb:unauthorized', { detail: failure }));
    throw failure;
  }
  if (!response.ok) throw new ApiError(response.status, 'ERROR', `the API answered ${response.status}`);
  return raw ? payload : payload.data;
}

export async function consoleSettings() {
  try {
    const response = await fetch(`${BASE}/console/settings.json`);
    return response.ok ? await response.json() : {};
  } catch {
    return {};
  }
}

// A presigned PUT with progress (fetch cannot report upload progress). The browser sets
// Content-Length itself; the URL is signed for the declared size and type.
export function putFile(upload, file, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open(upload.method || 'PUT', upload.url);
    for (const [name, value] of Object.entries(upload.headers || {})) {
      if (name.toLowerCase() !== 'content-length') xhr.setRequestHeader(name, value);
    }
    xhr.upload.onprogress = (event) => { if (event.lengthComputable) onProgress(event.loaded / event.total); };
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) { onProgress(1); resolve(); }
      else reject(new ApiError(xhr.status, 'UPLOAD_FAILED', `the bucket refused the upload (${xhr.status})`));
    };
    xhr.onerror = () => reject(new ApiError(0, 'UPLOAD_FAILED', 'the upload did not reach the bucket'));
    xhr.send(file);
  });
}
