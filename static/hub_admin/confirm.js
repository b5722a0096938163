// A form with data-confirm asks before it is sent (deploy and rollback change what runs on the next call).
document.addEventListener("submit", (event) => {
  const question = event.target.dataset ? event.target.dataset.confirm : null;
  if (question && !window.confirm(question)) event.preventDefault();
});
