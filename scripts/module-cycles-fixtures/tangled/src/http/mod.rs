mod handlers;
mod verbs;
